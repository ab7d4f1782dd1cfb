"""The operators' extra links: the cockpit's tabs by default, ``[training] job_link_template`` when
set, and no XCom lookup (which Airflow logs as an error) for what a failed task never pushed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_provider_training.links import cockpit

FAILS_BEFORE_SUBMIT = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider_training.operators import PyTorchJobOperator

with DAG("{dag_id}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(task_id="train", job={{"kind": "PyTorchJob", "spec": {{"pytorchReplicaSpecs": {{}}}}}})
"""


def test_view_urls_name_the_task_instance_tab():
    key = SimpleNamespace(dag_id="d", run_id="manual__2026-01-01T00:00:00+00:00", task_id="t", map_index=-1)
    # ":" and "+" as the browser writes them in a path (Airflow's UI matches its tabs on that form)
    assert cockpit.view_url(key, cockpit.JOB_ROUTE, base="http://af") == (
        "http://af/dags/d/runs/manual__2026-01-01T00:00:00+00:00/tasks/t/plugin/training-job"
    )
    # what would end the segment, start a query or fragment, or read as an escape stays escaped
    hostile = SimpleNamespace(dag_id="d", run_id="a/b?c#d%20 e", task_id="g.t", map_index=-1)
    assert cockpit.view_url(hostile, cockpit.JOB_ROUTE, base="") == (
        "/dags/d/runs/a%2Fb%3Fc%23d%2520%20e/tasks/g.t/plugin/training-job"
    )
    mapped = SimpleNamespace(dag_id="d", run_id="r", task_id="t", map_index=2)
    assert (
        cockpit.view_url(mapped, cockpit.MODELKIT_ROUTE, base="") == "/dags/d/runs/r/tasks/t/mapped/2/plugin/modelkit"
    )


@pytest.mark.parametrize("fixed", [True, False])
def test_a_task_that_fails_before_submitting_logs_no_xcom_error(fixed, write_dag, capfd, monkeypatch, control_plane):
    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "")
    monkeypatch.setenv("AIRFLOW__TRAINING__EMBEDDED_HOME", str(control_plane.home))
    if not fixed:  # the control: asking XCom regardless is what logged the error
        monkeypatch.setattr(cockpit, "pushed", lambda operator, attribute: True)
        monkeypatch.setattr("airflow_provider_training.links.training.pushed", lambda operator, attribute: True)
    dag_id = f"fails_before_submit_{'fixed' if fixed else 'control'}"
    run = write_dag(FAILS_BEFORE_SUBMIT.format(dag_id=dag_id), dag_id).test()
    assert run.get_task_instance("train").state == "failed"
    out = "".join(capfd.readouterr())
    assert ("XCom not found" in out) is not fixed


TEMPLATED = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_provider_training.operators import PyTorchJobOperator

with DAG("{dag_id}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    PyTorchJobOperator(task_id="train", name="{name}", job={job!r})
"""


def test_job_link_template_still_overrides_the_cockpit_link(write_dag, monkeypatch, control_plane):
    from tests.factories import simple_job as job

    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "")
    monkeypatch.setenv("AIRFLOW__TRAINING__EMBEDDED_HOME", str(control_plane.home))
    monkeypatch.setenv("AIRFLOW__TRAINING__JOB_LINK_TEMPLATE", "https://dashboard.example/{namespace}/{plural}/{name}")
    body = job("PyTorchJob", "templated", {"Master": 1}, script="print('done')")
    run = write_dag(TEMPLATED.format(dag_id="link_template", name="templated", job=body), "link_template").test()
    ti = run.get_task_instance("train")
    assert ti.state == "success"
    assert ti.xcom_pull(task_ids="train", key="_link_TrainingJobLink") == (
        "https://dashboard.example/default/pytorchjobs/templated"
    )
