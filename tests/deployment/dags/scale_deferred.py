"""DAGs of ``benchmarks/scale.py``'s deferred section (and its test): ``params.n`` deferred tasks in
one run, as mapped task instances. (The anchor's DAG is a file of its own, ``scale_deferred_kpo.py``,
so that each task imports only its own operator.)

- ``scale_deferred_training``: ``TrainingJobOperator`` (deferrable) of a PyTorchJob whose
  ``runPolicy.managedBy`` names another controller, so the embedded job controller leaves it alone
  and the benchmark plays the Training Operator (``tests/fixtures/job_driver.py``): no replica
  process runs, the jobs are API objects that start, idle and finish when the benchmark says. A
  job that succeeded ends its task in the triggerer (``end_from_trigger``);
- ``scale_deferred_training_resume``: the same, each task resumed on a worker (the baseline).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_training.operators import TrainingJobOperator

MANAGED_BY = "kueue.x-k8s.io/multikueue"  # not the embedded job controller (the webhook allows only these two)
PARAMS = {
    "n": Param(10, type="integer", minimum=1, maximum=5000, description="Deferred tasks in this run."),
    "namespace": Param("default", type="string", description="Where the jobs go."),
    "stage": Param(0, type="integer", minimum=0, description="Names this run's jobs: scale-s<stage>-<index>."),
}


def driven_job(name: str) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["true"]}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "labels": {"scale-benchmark": "deferred"}},
        "spec": {
            "runPolicy": {"managedBy": MANAGED_BY},
            "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}}},
        },
    }


@task
def jobs(**context: Any) -> list[dict[str, Any]]:
    params = context["params"]
    return [driven_job(f"scale-s{params['stage']}-{i}") for i in range(int(params["n"]))]


for dag_id, end_from_trigger in (("scale_deferred_training", None), ("scale_deferred_training_resume", False)):
    # the second: every task resumes on a worker when its job finished (the baseline of end_from_trigger)
    with DAG(
        dag_id=dag_id,
        schedule=None,
        catchup=False,
        params=PARAMS,
        max_active_tasks=5000,
        tags=["benchmark"],
        doc_md=__doc__,
    ):
        TrainingJobOperator.partial(
            task_id="train",
            namespace="{{ params.namespace }}",
            deferrable=True,
            end_from_trigger=end_from_trigger,
            max_active_tis_per_dag=5000,
        ).expand(job=jobs())
