"""XGBoostJob example: distributed XGBoost (Rabit collective) on a Master and a Worker.

The operator gives each replica MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE; the Master also runs
the Rabit tracker. ``code/xgboost_train.py`` writes ``model.json`` and ``metrics.json``, which
``package`` pushes as a ModelKit.
"""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_provider_training.operators import XGBoostJobOperator
from airflow_provider_training.operators.modelkit import ModelKitPackAndPushOperator
from airflow_provider_training.operators.naming import MACROS

RUN_DIR = "{{ run_tag('xgboost') }}"


def replica() -> dict:
    return {
        "replicas": 1,
        "restartPolicy": "OnFailure",
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "xgboost",
                        "image": "ccr.ccs.tencentyun.com/ml-models/digits-xgboost:latest",
                        "command": ["python", "code/xgboost_train.py"],
                        "args": ["--rounds=10", f"--output=/output/{RUN_DIR}"],
                        "volumeMounts": [{"name": "output", "mountPath": "/output"}],
                    }
                ],
                "volumes": [{"name": "output", "persistentVolumeClaim": {"claimName": "digits-output"}}],
            }
        },
    }


with DAG(
    dag_id="xgboostjob_example",
    schedule=None,
    catchup=False,
    tags=["example", "xgboostjob"],
    doc_md=__doc__,
    user_defined_macros=MACROS,
):
    train = XGBoostJobOperator(
        task_id="train",
        job={
            "apiVersion": "kubeflow.org/v1",
            "kind": "XGBoostJob",
            "metadata": {"name": "{{ run_name('xgb-digits') }}"},
            "spec": {"xgbReplicaSpecs": {"Master": replica(), "Worker": replica()}},
        },
    )
    package = ModelKitPackAndPushOperator(
        task_id="package",
        source=f"pvc://digits-output/{RUN_DIR}",
        reference="{{ conn.modelkit_registry_default.host }}/ml-models/digits-xgboost:{{ run_tag() }}",
        registry_conn_id="modelkit_registry_default",
    )
    train >> package
