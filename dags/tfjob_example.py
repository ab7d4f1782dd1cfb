"""TFJob example: a chief and a worker trained from ``TF_CONFIG``.

The Training Operator describes a TFJob's cluster to every replica in ``TF_CONFIG``; the example
script ``code/tf_config_train.py`` reads it (as ``tf.distribute.MultiWorkerMirroredStrategy``
would) and trains the digit classifier with it. The model lands on the ``digits-output`` volume.
"""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_provider_training.operators import TFJobOperator
from airflow_provider_training.operators.naming import MACROS


def replica(count: int) -> dict:
    return {
        "replicas": count,
        "restartPolicy": "OnFailure",
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "tensorflow",
                        "image": "ccr.ccs.tencentyun.com/ml-models/digits-train:latest",
                        "command": ["python", "code/tf_config_train.py"],
                        "args": ["--epochs=3", "--output=/output/{{ run_tag('tfjob') }}"],
                        "volumeMounts": [{"name": "output", "mountPath": "/output"}],
                    }
                ],
                "volumes": [{"name": "output", "persistentVolumeClaim": {"claimName": "digits-output"}}],
            }
        },
    }


with DAG(
    dag_id="tfjob_example",
    schedule=None,
    catchup=False,
    tags=["example", "tfjob"],
    doc_md=__doc__,
    user_defined_macros=MACROS,
):
    TFJobOperator(
        task_id="train",
        job={
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "{{ run_name('tf-digits') }}"},
            "spec": {"tfReplicaSpecs": {"Chief": replica(1), "Worker": replica(1)}},
        },
    )
