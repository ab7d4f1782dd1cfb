"""What the embedded control plane runs inside pods in place of upstream images: the built-in
TorchScript model server and KServe's storage initializer (InferenceService predictors), and Trainer
v2's dataset and model initializers (TrainJob initializer pods)."""
