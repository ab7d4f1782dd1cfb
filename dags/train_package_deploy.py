"""Train → package → deploy: the example DAG of airflow-provider-training.

What it does, task by task:

1. ``train`` — a PyTorchJob (1 Master + 1 Worker, PyTorch DDP over gloo) runs ``code/train.py`` on
   scikit-learn's handwritten digits. Rank 0 writes ``model.pt`` (TorchScript), ``metrics.json`` and
   a ``Kitfile`` to the ``digits-output`` volume, in a folder named after the run. With
   ``job_api: v2`` the same training runs as a Kubeflow Trainer v2 TrainJob (``torch-distributed``,
   2 nodes, under ``torchrun``); the tasks after it do not change.
2. ``package`` — packs that folder as a KitOps ModelKit and pushes it to the registry of the
   ``modelkit_registry_default`` connection as ``<registry>/ml-models/digits-classifier:<run tag>``
   (``run_tag()``: the run's time and a hash of its id, unique per run; XCom: ``reference``, ``digest``).
3. ``approve`` — with ``approve_deploy`` on, waits for a person (Airflow's Required Actions) who sees the
   candidate's and the served model's accuracy and the ModelKit digest: Approve deploys, Reject skips
   ``deploy`` and ``smoke_test``. Off (the default): goes ahead at once.
4. ``deploy`` — a KServe InferenceService ``digits`` serving ``kit://<reference>@<digest>`` (the
   digest pins exactly what was pushed); waits until the new model serves (XCom: ``url``).
5. ``smoke_test`` — sends 100 digits to ``<url>/v2/models/digits/infer`` (Open Inference Protocol)
   and fails unless at least 80 % are classified right.

Where it runs: with no ``kubernetes`` connection (the default) on the embedded control plane of
this machine — every replica and the predictor are local processes; with
``[training] kubernetes_conn_id`` set, on that cluster (Training Operator + KServe with the KitOps
storage container; see docs/cluster.md). Nothing in this file changes.

Try it: ``airflow dags trigger train_package_deploy --conf '{"epochs": 3}'`` on a deployment, ``airflow dags
test train_package_deploy``, or ``bash tools/run.sh`` on a fresh machine. ``gpus_per_replica`` > 0 gives
each replica that many ``nvidia.com/gpu`` (CUDA + NCCL instead of CPU + gloo). ``signing_conn_id`` (a
``modelkit_signing`` connection) signs the ModelKit in cosign's layout with the run's SLSA provenance, and
``deploy`` then serves only a digest that key signed (docs/kitops.md).
"""

from __future__ import annotations

import json
import urllib.request

from airflow.sdk import DAG, Param, task

from airflow_provider_training.operators import TrainingJobAPIOperator
from airflow_provider_training.operators.approval import DeployApprovalOperator
from airflow_provider_training.operators.deploy import InferenceServiceOperator
from airflow_provider_training.operators.modelkit import ModelKitPackAndPushOperator
from airflow_provider_training.operators.naming import MACROS

REGISTRY_CONN = "modelkit_registry_default"
OUTPUT_CLAIM = "digits-output"


def replica(epochs: str, batch_size: str, learning_rate: str, gpus: str) -> dict:
    """One replica's pod template: the same for Master and Worker; the operator tells each its RANK."""
    return {
        "replicas": 1,
        "restartPolicy": "OnFailure",
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "pytorch",
                        # On a cluster: an image with PyTorch, scikit-learn and code/train.py in its
                        # working directory. On the embedded control plane: this Python, run in the
                        # folder of this DAG file.
                        "image": "ccr.ccs.tencentyun.com/ml-models/digits-train:latest",
                        "command": ["python", "code/train.py"],
                        "args": [
                            f"--epochs={epochs}",
                            f"--batch-size={batch_size}",
                            f"--lr={learning_rate}",
                            "--output=/output/{{ run_tag() }}",
                        ],
                        # 0 (the default) on a laptop; on a GPU node the replica sees that many GPUs
                        # (CUDA_VISIBLE_DEVICES) and train.py switches to CUDA + NCCL.
                        "resources": {"limits": {"nvidia.com/gpu": gpus}},
                        "volumeMounts": [{"name": "output", "mountPath": "/output"}],
                    }
                ],
                "volumes": [{"name": "output", "persistentVolumeClaim": {"claimName": OUTPUT_CLAIM}}],
            }
        },
    }


ARGS = ("{{ params.epochs }}", "{{ params.batch_size }}", "{{ params.learning_rate }}", "{{ params.gpus_per_replica }}")

PYTORCHJOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "{{ run_name('digits') }}"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": replica(*ARGS),
            "Worker": replica(*ARGS),
        },
        "runPolicy": {"cleanPodPolicy": "None"},
    },
}

# The same training as a Kubeflow Trainer v2 TrainJob: torchrun gets the node count, rank and master
# address from the torch-distributed runtime's PET_* variables; the output claim comes in through a
# runtime patch (a TrainJob cannot set volumes itself).
TRAINJOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "{{ run_name('digits') }}"},
    "spec": {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {
            "numNodes": 2,
            "image": "ccr.ccs.tencentyun.com/ml-models/digits-train:latest",
            "command": ["torchrun", "code/train.py"],
            "args": [
                "--epochs={{ params.epochs }}",
                "--batch-size={{ params.batch_size }}",
                "--lr={{ params.learning_rate }}",
                "--output=/output/{{ run_tag() }}",
            ],
            "resourcesPerNode": {
                "requests": {"cpu": "1"},
                "limits": {"nvidia.com/gpu": "{{ params.gpus_per_replica }}"},
            },
        },
        "runtimePatches": [
            {
                "manager": "airflow-provider-training.io/train-package-deploy",
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": "node",
                                    "template": {
                                        "spec": {
                                            "template": {
                                                "spec": {
                                                    "volumes": [
                                                        {
                                                            "name": "output",
                                                            "persistentVolumeClaim": {"claimName": OUTPUT_CLAIM},
                                                        }
                                                    ],
                                                    "containers": [
                                                        {
                                                            "name": "node",
                                                            "volumeMounts": [
                                                                {"name": "output", "mountPath": "/output"}
                                                            ],
                                                        }
                                                    ],
                                                }
                                            }
                                        }
                                    },
                                }
                            ]
                        }
                    }
                },
            }
        ],
    },
}

with DAG(
    dag_id="train_package_deploy",
    description="Train a digit classifier with PyTorch DDP, pack it as a ModelKit, serve it with KServe.",
    schedule=None,
    catchup=False,
    tags=["example", "pytorch", "kitops", "kserve"],
    doc_md=__doc__,
    user_defined_macros=MACROS,
    params={
        "epochs": Param(10, type="integer", minimum=1, maximum=200, description="Passes over the training set."),
        "batch_size": Param(64, type="integer", minimum=1, maximum=1024),
        "learning_rate": Param(0.01, type="number", exclusiveMinimum=0, maximum=1),
        "repository": Param(
            "ml-models/digits-classifier",
            type="string",
            pattern=r"^[a-z0-9]+([._-][a-z0-9]+)*/[a-z0-9]+([._-][a-z0-9]+)*$",
            description="<namespace>/<repository> in the registry (TCR allows exactly two segments).",
        ),
        "namespace": Param("default", type="string", description="Kubernetes namespace of the job and the service."),
        "job_api": Param(
            "v1",
            enum=["v1", "v2"],
            description="v1: a Training Operator PyTorchJob; v2: a Kubeflow Trainer v2 TrainJob (torch-distributed).",
        ),
        "gpus_per_replica": Param(
            0, type="integer", minimum=0, maximum=8, description="nvidia.com/gpu limit of each replica (0: CPU, gloo)."
        ),
        # Optional: null (the default) means no signing. A required string with an empty default
        # kept the trigger form's Trigger button disabled.
        "signing_conn_id": Param(
            None,
            type=["null", "string"],
            description="A modelkit_signing connection: sign the ModelKit (cosign layout) with the run's SLSA "
            "provenance attached, and deploy only after verifying the signature and every layer. Empty: no signing. "
            "Checked before anything is pushed.",
        ),
        "approve_deploy": Param(
            False,
            type="boolean",
            description="Ask a person before deploying: the approval (Required Actions) shows the candidate's and "
            "the deployed model's accuracy and the ModelKit digest; Reject skips deploy and smoke_test.",
        ),
    },
) as dag:
    train = TrainingJobAPIOperator(
        task_id="train",
        job_api="{{ params.job_api }}",
        v1_job=PYTORCHJOB,
        v2_job=TRAINJOB,
        namespace="{{ params.namespace }}",
    )

    package = ModelKitPackAndPushOperator(
        task_id="package",
        source=f"pvc://{OUTPUT_CLAIM}/" + "{{ run_tag() }}",
        reference="{{ conn." + REGISTRY_CONN + ".host }}/{{ params.repository }}:{{ run_tag() }}",
        registry_conn_id=REGISTRY_CONN,
        namespace="{{ params.namespace }}",
        signing_conn_id="{{ params.signing_conn_id or '' }}",  # empty: not signed
    )

    approve = DeployApprovalOperator(
        task_id="approve",
        enabled="{{ params.approve_deploy }}",
        candidate="{{ ti.xcom_pull(task_ids='package', key='reference') }}"
        "@{{ ti.xcom_pull(task_ids='package', key='digest') }}",
        service_name="digits",
        namespace="{{ params.namespace }}",
        registry_conn_id=REGISTRY_CONN,
    )

    deploy = InferenceServiceOperator(
        task_id="deploy",
        name="digits",
        namespace="{{ params.namespace }}",
        storage_uri="{{ ti.xcom_pull(task_ids='package', key='reference') }}"
        "@{{ ti.xcom_pull(task_ids='package', key='digest') }}",
        registry_conn_id=REGISTRY_CONN,
        signing_conn_id="{{ params.signing_conn_id or '' }}",  # set: refuse what that key did not sign
    )

    @task
    def smoke_test(url: str) -> dict:
        """Classify 100 held-out digits through the served URL; a sane model gets most of them right."""
        from sklearn.datasets import load_digits

        digits = load_digits()
        rows, labels = digits.data[-100:], digits.target[-100:]
        body = {
            "inputs": [{"name": "input-0", "shape": [100, 64], "datatype": "FP32", "data": rows.flatten().tolist()}]
        }
        request = urllib.request.Request(
            f"{url}/v2/models/digits/infer",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            output = json.load(response)["outputs"][0]
        logits = [output["data"][i * 10 : (i + 1) * 10] for i in range(100)]
        predicted = [max(range(10), key=row.__getitem__) for row in logits]
        accuracy = sum(int(p == t) for p, t in zip(predicted, labels, strict=True)) / 100
        print(f"prediction for the first digit (a {labels[0]}): {predicted[0]}; accuracy on 100 digits: {accuracy:.2f}")
        if accuracy < 0.8:
            raise ValueError(f"the served model classified only {accuracy:.0%} of 100 digits right (expected >= 80%)")
        return {"first_prediction": predicted[0], "first_label": int(labels[0]), "accuracy": accuracy}

    train >> package >> approve >> deploy >> smoke_test(deploy.output["url"])
