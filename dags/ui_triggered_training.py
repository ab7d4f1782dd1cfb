"""Training configured from the Airflow UI: press "Trigger DAG", fill in the form, run.

Every field of the trigger form is a ``Param`` with a JSON schema, so Airflow refuses a run whose
values are out of range *before* anything starts (the form shows the error; ``airflow dags trigger
--conf`` and the REST API get it back as an error):

- ``kind`` — ``PyTorchJob`` (DDP through MASTER_ADDR/RANK) or ``TFJob`` (the same training driven
  by ``TF_CONFIG``, as a TensorFlow job would be);
- ``workers`` (0-4, besides the Master / chief), ``epochs``, ``learning_rate``, ``batch_size``;
- ``repository`` and ``tag`` of the ModelKit (tag empty = the run's time and a hash of its id);
- ``gpus_per_replica`` — the ``nvidia.com/gpu`` limit of each replica (0: CPU);
- ``deploy`` — also roll the model out to the ``digits`` InferenceService.

Tasks: ``job_spec`` builds the job document from the form (numbers stay numbers), a branch runs
``train_pytorchjob`` or ``train_tfjob``, then ``package`` and, if asked, ``deploy``.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowSkipException

from airflow_provider_training.operators import PyTorchJobOperator, TFJobOperator
from airflow_provider_training.operators.deploy import InferenceServiceOperator
from airflow_provider_training.operators.modelkit import ModelKitPackAndPushOperator
from airflow_provider_training.operators.naming import MACROS, names_for, require_param

REGISTRY_CONN = "modelkit_registry_default"
OUTPUT_CLAIM = "digits-output"
RUN_DIR = "{{ run_tag('ui') }}"  # the folder job_spec writes to (names_for(context, "ui")["tag"])
DAG_ID = "ui_triggered_training"
# what job_spec needs from the form, with an example value for the error message of a missing one
EXAMPLES = {"workers": 1, "epochs": 5, "learning_rate": 0.01, "batch_size": 64, "gpus_per_replica": 0}
TAG_PATTERN = r"^([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$"

with DAG(
    dag_id=DAG_ID,
    description="Train with the kind, size and hyper-parameters chosen in the trigger form.",
    schedule=None,
    catchup=False,
    tags=["example", "ui", "params"],
    doc_md=__doc__,
    user_defined_macros=MACROS,
    params={
        "kind": Param("PyTorchJob", type="string", enum=["PyTorchJob", "TFJob"], title="Job kind"),
        "workers": Param(1, type="integer", minimum=0, maximum=4, title="Workers (besides Master/chief)"),
        "epochs": Param(5, type="integer", minimum=1, maximum=200, title="Epochs"),
        "learning_rate": Param(0.01, type="number", exclusiveMinimum=0, maximum=1, title="Learning rate"),
        "batch_size": Param(64, type="integer", minimum=8, maximum=1024, title="Batch size"),
        "repository": Param(
            "ml-models/digits-classifier",
            type="string",
            pattern=r"^[a-z0-9]+([._-][a-z0-9]+)*/[a-z0-9]+([._-][a-z0-9]+)*$",
            title="ModelKit repository (<namespace>/<name>)",
        ),
        "tag": Param(None, type=["null", "string"], pattern=TAG_PATTERN, title="Tag (empty = the run's time and hash)"),
        "deploy": Param(False, type="boolean", title="Deploy to the digits InferenceService"),
        "namespace": Param("default", type="string", title="Kubernetes namespace"),
        "gpus_per_replica": Param(0, type="integer", minimum=0, maximum=8, title="GPUs per replica (nvidia.com/gpu)"),
    },
) as dag:

    @task
    def job_spec(**context: Any) -> dict:
        """The training job of the form's values, for either kind, named after the run (runs
        triggered without a logical date included)."""
        params = context.get("params")
        kind = require_param(params, "kind", DAG_ID, "PyTorchJob")
        value = {name: require_param(params, name, DAG_ID, example) for name, example in EXAMPLES.items()}
        names = names_for(context, "ui")
        script = "code/train.py" if kind == "PyTorchJob" else "code/tf_config_train.py"
        container = {
            "name": "pytorch" if kind == "PyTorchJob" else "tensorflow",
            "image": "ccr.ccs.tencentyun.com/ml-models/digits-train:latest",
            "command": ["python", script],
            "args": [
                f"--epochs={value['epochs']}",
                f"--lr={value['learning_rate']}",
                f"--batch-size={value['batch_size']}",
                f"--output=/output/{names['tag']}",
            ],
            "volumeMounts": [{"name": "output", "mountPath": "/output"}],
            # as the seed's YAML: a GPU limit per replica; 0 = CPU (train.py then uses gloo)
            "resources": {"limits": {"nvidia.com/gpu": int(value["gpus_per_replica"])}},
        }

        def replicas(n: int) -> dict:
            return {
                "replicas": n,
                "restartPolicy": "OnFailure",
                "template": {
                    "spec": {
                        "containers": [dict(container)],
                        "volumes": [{"name": "output", "persistentVolumeClaim": {"claimName": OUTPUT_CLAIM}}],
                    }
                },
            }

        name, workers = names["name"], int(value["workers"])
        if kind == "PyTorchJob":
            specs = {"Master": replicas(1)} | ({"Worker": replicas(workers)} if workers else {})
            return {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": name},
                "spec": {"pytorchReplicaSpecs": specs},
            }
        specs = {"Chief": replicas(1)} | ({"Worker": replicas(workers)} if workers else {})
        return {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": name},
            "spec": {"tfReplicaSpecs": specs},
        }

    @task.branch
    def choose_kind(params: dict | None = None) -> str:
        kind = require_param(params, "kind", DAG_ID, "PyTorchJob")
        return "train_pytorchjob" if kind == "PyTorchJob" else "train_tfjob"

    spec = job_spec()
    pytorch = PyTorchJobOperator(task_id="train_pytorchjob", job=spec, namespace="{{ params.namespace }}")
    tensorflow = TFJobOperator(task_id="train_tfjob", job=spec, namespace="{{ params.namespace }}")

    package = ModelKitPackAndPushOperator(
        task_id="package",
        trigger_rule="none_failed_min_one_success",
        source=f"pvc://{OUTPUT_CLAIM}/{RUN_DIR}",
        reference="{{ conn." + REGISTRY_CONN + ".host }}/{{ params.repository }}:{{ params.tag or run_tag() }}",
        registry_conn_id=REGISTRY_CONN,
        namespace="{{ params.namespace }}",
    )

    @task
    def deploy_requested(params: dict | None = None) -> None:
        if not (params or {}).get("deploy"):
            raise AirflowSkipException("deploy was not asked for in the trigger form")

    deploy = InferenceServiceOperator(
        task_id="deploy",
        name="digits",
        namespace="{{ params.namespace }}",
        storage_uri="{{ ti.xcom_pull(task_ids='package', key='reference') }}"
        "@{{ ti.xcom_pull(task_ids='package', key='digest') }}",
        registry_conn_id=REGISTRY_CONN,
    )

    spec >> choose_kind() >> [pytorch, tensorflow] >> package >> deploy_requested() >> deploy
