"""Packaging pattern 1 (the seed's ``train-and-package.yaml``), the Airflow way: rank 0 of the
training job packs and pushes the ModelKit itself, right after training.

Differences from the seed file, which never worked as written (it has no Master, so ``RANK`` is
unset; its ``output`` volume is not defined; ``kit login -p`` exposes the password):

- a Master replica, so the operator sets ``RANK`` on every pod, and a defined ``output`` volume;
- credentials come from the ``kitops-credentials`` Secret (``KIT_USER`` / ``KIT_PASSWORD`` /
  ``KIT_UNPACK_FLAGS``) that ``registry_secret`` writes from the ``modelkit_registry_default``
  connection, and reach ``kit login`` on stdin;
- the reference is templated by Airflow (``{{ run_tag() }}``, unique per run) instead of ``$(date)`` in the pod,
  so the DAG knows what was pushed and can deploy it.

``airflow-training kit`` is this provider's implementation of ``kit`` (the same commands and
ModelKit bytes); on a cluster use an image with either.
"""

from __future__ import annotations

from airflow.sdk import DAG, task

from airflow_provider_training.operators import PyTorchJobOperator
from airflow_provider_training.operators.naming import MACROS

REGISTRY_CONN = "modelkit_registry_default"
REFERENCE = "{{ conn.modelkit_registry_default.host }}/ml-models/trained-model:{{ run_tag() }}"
SCRIPT = f"""
set -e
python code/train.py --epochs=3 --output=/output/{{{{ run_tag('in-job') }}}}
if [ "$RANK" = "0" ]; then
  if [ -n "$KIT_USER" ]; then
    printf '%s' "$KIT_PASSWORD" | airflow-training kit login "$TCR_REGISTRY" -u "$KIT_USER" --password-stdin $KIT_UNPACK_FLAGS
  fi
  airflow-training kit pack /output/{{{{ run_tag('in-job') }}}} -t "{REFERENCE}"
  airflow-training kit push "{REFERENCE}" $KIT_UNPACK_FLAGS
fi
"""


def replica() -> dict:
    return {
        "replicas": 1,
        "restartPolicy": "OnFailure",
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "ccr.ccs.tencentyun.com/ml-models/digits-train-kit:latest",
                        "command": ["/bin/sh", "-c", SCRIPT],
                        "env": [{"name": "TCR_REGISTRY", "value": "{{ conn.modelkit_registry_default.host }}"}],
                        "envFrom": [{"secretRef": {"name": "kitops-credentials", "optional": True}}],
                        "volumeMounts": [{"name": "output", "mountPath": "/output"}],
                    }
                ],
                "volumes": [{"name": "output", "persistentVolumeClaim": {"claimName": "digits-output"}}],
            }
        },
    }


with DAG(
    dag_id="package_in_training_job",
    schedule=None,
    catchup=False,
    tags=["example", "kitops", "packaging"],
    doc_md=__doc__,
    user_defined_macros=MACROS,
) as dag:

    @task
    def registry_secret() -> str:
        """Write the registry connection's credentials into the Secret the job's pods read."""
        from airflow_provider_training.operators.deploy import InferenceServiceOperator

        writer = InferenceServiceOperator(task_id="_secret", name="unused", registry_conn_id=REGISTRY_CONN)
        writer.apply_secret(writer.client())  # the cluster through the operator's hook
        return writer.storage_secret_name

    train_and_package = PyTorchJobOperator(
        task_id="train_and_package",
        job={
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "{{ run_name('train-and-package') }}"},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(), "Worker": replica()}},
        },
    )
    registry_secret() >> train_and_package
