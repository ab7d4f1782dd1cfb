"""The anchor of ``benchmarks/scale.py``'s deferred section: ``params.n`` deferrable
``KubernetesPodOperator`` tasks (cncf.kubernetes; its trigger polls the pod every 2 s) in one run, as
mapped task instances. Their pods are bound to a node that is not the embedded node agent's
(``spec.nodeName``), so none runs as a process: the benchmark plays their kubelet and writes their
status. The connection ``scale_kubernetes`` is the benchmark's (the same embedded plane).
"""

from __future__ import annotations

from typing import Any

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.sdk import DAG, Param, task

FAKE_NODE = "scale-fake-kubelet"  # no node agent runs this node's pods
PARAMS = {
    "n": Param(10, type="integer", minimum=1, maximum=5000, description="Deferred tasks in this run."),
    "namespace": Param("default", type="string", description="Where the pods go."),
    "stage": Param(0, type="integer", minimum=0, description="Label scale-stage of this run's pods."),
}


@task
def indexes(**context: Any) -> list[list[str]]:
    return [[str(i)] for i in range(int(context["params"]["n"]))]


with DAG(
    dag_id="scale_deferred_kpo",
    schedule=None,
    catchup=False,
    params=PARAMS,
    max_active_tasks=5000,
    tags=["benchmark"],
    doc_md=__doc__,
):
    KubernetesPodOperator.partial(
        task_id="pod",
        name="scale-kpo",
        namespace="{{ params.namespace }}",
        kubernetes_conn_id="scale_kubernetes",
        labels={"scale-stage": "{{ params.stage }}"},
        image="python:3.11",
        cmds=["true"],
        pod_template_dict={"spec": {"nodeName": FAKE_NODE, "containers": [{"name": "base"}]}},
        deferrable=True,
        get_logs=False,
        do_xcom_push=False,
        on_finish_action="delete_pod",
        max_active_tis_per_dag=5000,
    ).expand(arguments=indexes())
