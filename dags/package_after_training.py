"""Packaging pattern 2 (the seed's ``package-job.yaml``), the Airflow way: package in a separate step
once the training job has succeeded.

The seed runs a batch Job whose first line is ``kubectl wait --for=condition=Succeeded
pytorchjob/... --timeout=3600s``. In Airflow the waiting is a task of its own:

1. ``submit`` creates the PyTorchJob and returns at once (``wait_for_completion=False``), like
   ``kubectl apply``;
2. ``wait_for_training`` is a deferrable ``TrainingJobSensor``: ``kubectl wait`` without holding a
   worker slot, failing with the job's own reason if it fails (the seed's Job would just time out);
3. ``package`` packs ``pvc://model-output-pvc/<run>`` — the claim the training wrote to — with a
   Kitfile and pushes it with the registry connection's credentials (no ``kit login -p``).
"""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_provider_training.operators import PyTorchJobOperator
from airflow_provider_training.operators.modelkit import ModelKitPackAndPushOperator
from airflow_provider_training.operators.naming import MACROS
from airflow_provider_training.sensors import TrainingJobSensor

CLAIM = "model-output-pvc"
RUN_DIR = "{{ run_tag('after') }}"


def replica() -> dict:
    return {
        "replicas": 1,
        "restartPolicy": "OnFailure",
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "ccr.ccs.tencentyun.com/ml-models/digits-train:latest",
                        "command": ["python", "code/train.py"],
                        "args": ["--epochs=3", f"--output=/output/{RUN_DIR}"],
                        "volumeMounts": [{"name": "output", "mountPath": "/output"}],
                    }
                ],
                "volumes": [{"name": "output", "persistentVolumeClaim": {"claimName": CLAIM}}],
            }
        },
    }


with DAG(
    dag_id="package_after_training",
    schedule=None,
    catchup=False,
    tags=["example", "kitops", "packaging"],
    doc_md=__doc__,
    user_defined_macros=MACROS,
) as dag:
    submit = PyTorchJobOperator(
        task_id="submit",
        job={
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "{{ run_name('pytorch-mnist-ddp') }}"},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(), "Worker": replica()}},
        },
        wait_for_completion=False,
    )
    wait_for_training = TrainingJobSensor(
        task_id="wait_for_training",
        kind="PyTorchJob",
        job_name="{{ ti.xcom_pull(task_ids='submit', key='job_name') }}",
        namespace="default",
        deferrable=True,
        timeout=3600,
    )
    package = ModelKitPackAndPushOperator(
        task_id="package",
        source=f"pvc://{CLAIM}/{RUN_DIR}",
        reference="{{ conn.modelkit_registry_default.host }}/ml-models/mnist-model:{{ run_tag() }}",
        registry_conn_id="modelkit_registry_default",
    )
    submit >> wait_for_training >> package
