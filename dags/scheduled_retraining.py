"""Scheduled retraining: retrain every night, and whenever the training data changes; deploy the new
model only if it beats the one being served.

Runs on a cron schedule (03:00 UTC daily) **or** when the ``digits-training-data`` Asset is updated
(a data-ingestion DAG declares it as an outlet; ``airflow assets materialize`` works too).

1. ``train`` — the same PyTorchJob as ``train_package_deploy``.
2. ``package`` — pushes the candidate as ``<registry>/<repository>:candidate-<run tag>`` (the run's time and a hash of its id).
3. ``compare`` — reads ``metrics.json`` of the candidate **and of the ModelKit the InferenceService
   serves now** (the one its ``storageUri`` names) from the registry, logs both numbers and the
   decision, and skips the deploy unless the candidate is better by at least
   ``params.min_improvement`` (or nothing is deployed yet).
4. ``deploy`` — rolls the InferenceService over to the candidate (the old model serves until the
   new one is ready).
"""

from __future__ import annotations

import json

from airflow.sdk import DAG, Asset, Param, task
from airflow.timetables.assets import AssetOrTimeSchedule
from airflow.timetables.trigger import CronTriggerTimetable

from airflow_provider_training.operators import PyTorchJobOperator
from airflow_provider_training.operators.deploy import InferenceServiceOperator
from airflow_provider_training.operators.modelkit import ModelKitPackAndPushOperator
from airflow_provider_training.operators.naming import MACROS, require_param

REGISTRY_CONN = "modelkit_registry_default"
OUTPUT_CLAIM = "digits-output"
SERVICE = "digits"
RUN_DIR = "{{ run_tag('retrain') }}"
TRAINING_DATA = Asset(name="digits-training-data", uri="file:///data/digits/train.csv")

REPLICA = {
    "replicas": 1,
    "restartPolicy": "OnFailure",
    "template": {
        "spec": {
            "containers": [
                {
                    "name": "pytorch",
                    "image": "ccr.ccs.tencentyun.com/ml-models/digits-train:latest",
                    "command": ["python", "code/train.py"],
                    "args": [
                        "--epochs={{ params.epochs }}",
                        "--lr={{ params.learning_rate }}",
                        f"--output=/output/{RUN_DIR}",
                    ],
                    "volumeMounts": [{"name": "output", "mountPath": "/output"}],
                }
            ],
            "volumes": [{"name": "output", "persistentVolumeClaim": {"claimName": OUTPUT_CLAIM}}],
        }
    },
}

with DAG(
    dag_id="scheduled_retraining",
    description="Nightly / on-new-data retraining that deploys only a better model.",
    schedule=AssetOrTimeSchedule(
        timetable=CronTriggerTimetable("0 3 * * *", timezone="UTC"),
        assets=TRAINING_DATA,
    ),
    catchup=False,
    max_active_runs=1,
    tags=["example", "retraining", "kserve"],
    doc_md=__doc__,
    user_defined_macros=MACROS,
    params={
        "epochs": Param(10, type="integer", minimum=1, maximum=200),
        "learning_rate": Param(0.01, type="number", exclusiveMinimum=0, maximum=1),
        "metric": Param("accuracy", type="string", enum=["accuracy"], description="Key of metrics.json to compare."),
        "min_improvement": Param(0.0, type="number", minimum=0, description="How much better the candidate must be."),
        "repository": Param("ml-models/digits-classifier", type="string"),
        "namespace": Param("default", type="string"),
    },
) as dag:
    train = PyTorchJobOperator(
        task_id="train",
        job={
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "{{ run_name('retrain') }}"},
            "spec": {"pytorchReplicaSpecs": {"Master": REPLICA, "Worker": REPLICA}},
        },
        namespace="{{ params.namespace }}",
    )

    package = ModelKitPackAndPushOperator(
        task_id="package",
        source=f"pvc://{OUTPUT_CLAIM}/{RUN_DIR}",
        reference="{{ conn." + REGISTRY_CONN + ".host }}/{{ params.repository }}:{{ run_tag('candidate') }}",
        registry_conn_id=REGISTRY_CONN,
        namespace="{{ params.namespace }}",
    )

    @task.short_circuit
    def compare(candidate: str, digest: str, params: dict | None = None) -> bool:
        """True (deploy) when the candidate beats the served ModelKit on ``params.metric``."""
        from airflow_provider_training.hooks.registry import ModelKitRegistryHook
        from airflow_provider_training.kitops.files import read_file
        from airflow_provider_training.operators.deploy import deployed_storage_uri

        metric = require_param(params, "metric", "scheduled_retraining", "accuracy")
        margin = float(require_param(params, "min_improvement", "scheduled_retraining", 0.0))
        namespace = require_param(params, "namespace", "scheduled_retraining", "default")
        hook = ModelKitRegistryHook(REGISTRY_CONN)

        def score(reference: str) -> float:
            with hook.get_conn(reference.removeprefix("kit://").split("/", 1)[0]) as client:
                metrics = json.loads(read_file(client, reference, "metrics.json"))
            return float(metrics[metric])

        new = score(f"{candidate}@{digest}")
        served = deployed_storage_uri(SERVICE, namespace)
        if served is None:
            print(f"decision: deploy — nothing is deployed yet; candidate {metric}={new:.4f}")
            return True
        old = score(served)
        better = new > old + margin
        print(
            f"decision: {'deploy' if better else 'skip'} — candidate {metric}={new:.4f}, "
            f"deployed ({served}) {metric}={old:.4f}, required improvement {margin}"
        )
        return better

    deploy = InferenceServiceOperator(
        task_id="deploy",
        name=SERVICE,
        namespace="{{ params.namespace }}",
        storage_uri="{{ ti.xcom_pull(task_ids='package', key='reference') }}"
        "@{{ ti.xcom_pull(task_ids='package', key='digest') }}",
        registry_conn_id=REGISTRY_CONN,
    )

    decision = compare(package.output["reference"], package.output["digest"])
    train >> package >> decision >> deploy
