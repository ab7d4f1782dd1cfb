"""TrainJob example (Kubeflow Trainer v2): the digits training of ``code/train.py`` on the default
``torch-distributed`` ClusterTrainingRuntime, 2 nodes.

The runtime's torch plugin gives every node ``PET_NNODES``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR`` and
``PET_MASTER_PORT``, which ``torchrun`` reads; rank 0 writes ``model.pt``, ``metrics.json`` and a
``Kitfile`` to the ``digits-output`` claim (mounted through a ``runtimePatches`` entry, as the SDK's
``RuntimePatch`` option would), and ``package`` pushes them as a ModelKit. On the embedded control
plane the same TrainJob runs as local processes; on a cluster it needs Trainer v2.3.0 installed
(``docs/trainer-v2.md``). The task log shows node-0's output and the TrainJob's ``trainerStatus``.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from airflow_provider_training.operators import TrainJobOperator
from airflow_provider_training.operators.modelkit import ModelKitPackAndPushOperator
from airflow_provider_training.operators.naming import MACROS

RUN_DIR = "{{ run_tag('trainjob') }}"
PATCH_MANAGER = "airflow-provider-training.io/trainjob-example"

with DAG(
    dag_id="trainjob_example",
    schedule=None,
    catchup=False,
    tags=["example", "trainjob", "trainer-v2"],
    doc_md=__doc__,
    user_defined_macros=MACROS,
    params={
        "epochs": Param(5, type="integer", minimum=1, maximum=100, description="Training epochs"),
        "nodes": Param(2, type="integer", minimum=1, maximum=8, description="numNodes of the TrainJob"),
    },
):
    train = TrainJobOperator(
        task_id="train",
        job={
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "{{ run_name('digits-v2') }}"},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {
                    "numNodes": "{{ params.nodes }}",
                    "command": ["torchrun", "code/train.py"],
                    "args": ["--epochs={{ params.epochs }}", f"--output=/output/{RUN_DIR}"],
                    "resourcesPerNode": {"requests": {"cpu": "1"}},
                },
                "runtimePatches": [
                    {
                        "manager": PATCH_MANAGER,
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
                                                                    "persistentVolumeClaim": {
                                                                        "claimName": "digits-output"
                                                                    },
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
        },
    )
    package = ModelKitPackAndPushOperator(
        task_id="package",
        source=f"pvc://digits-output/{RUN_DIR}",
        reference="{{ conn.modelkit_registry_default.host }}/ml-models/digits-v2:{{ run_tag() }}",
        registry_conn_id="modelkit_registry_default",
    )
    train >> package
