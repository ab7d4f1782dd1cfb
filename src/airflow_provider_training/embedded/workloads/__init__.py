"""Built-in model servers the embedded InferenceService controller runs as predictor processes."""
