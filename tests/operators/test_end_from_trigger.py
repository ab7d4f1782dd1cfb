"""A deferred training task whose job succeeded ends in the triggerer: the trigger prints the chosen
replicas' logs, applies ``on_finish_action`` and hands Airflow the summary as ``return_value`` in a
``TaskSuccessEvent`` — no worker resumes the task. A failed job still resumes on a worker (the
failure report, retries), and the operator keeps the worker's path where only a worker can do what
the task promises (outlets' asset events, listeners). The triggers here run as the installed
triggerer runs them (built from the kwargs the worker stored) against real jobs and replicas; the
full path through a real scheduler and triggerer is ``tests/deployment/test_smoke.py``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from airflow.sdk import Asset
from airflow.sdk.exceptions import TaskDeferred
from airflow.triggers.base import TaskSuccessEvent, TriggerEvent

from airflow_provider_training.client.logselect import RESUME_LOG_LINES
from airflow_provider_training.operators import PyTorchJobOperator
from airflow_provider_training.triggers import TrainingJobTrigger
from tests.factories import simple_job as job
from tests.waiting import wait_for


def _first_event(trigger: TrainingJobTrigger) -> TriggerEvent:
    async def first() -> TriggerEvent:
        async for event in trigger.run():
            return event
        raise AssertionError("no event")

    return asyncio.run(first())


def _finished_job(client: Any, namespace: str, name: str, script: str, replicas: dict[str, int] | None = None) -> Any:
    created = client.create(job(name=name, script=script, replicas=replicas), namespace=namespace)
    return wait_for(
        lambda: (j := client.find("PyTorchJob", name, namespace)) and j.get("status", {}).get("completionTime") and j,
        120,
        f"{name} to finish",
    ), created["metadata"]["uid"]


def _stored_trigger(namespace: str, name: str, uid: str, **kwargs: Any) -> TrainingJobTrigger:
    from airflow_provider_training.hooks.training import TrainingHook

    made = TrainingJobTrigger("PyTorchJob", name, namespace, uid, **TrainingHook().trigger_connection(), **kwargs)
    return TrainingJobTrigger(**made.serialize()[1])  # as the triggerer builds it


def test_a_succeeded_job_ends_the_task_in_the_triggerer_with_its_logs_and_summary(
    embedded_default: Any, test_namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    from airflow_provider_training.hooks.training import TrainingHook

    client = TrainingHook().get_client()
    script = "import sys\nprint('epoch 1 loss 0.4')\nfor i in range(20000): print(f'line {i}')"
    _, uid = _finished_job(client, test_namespace, "ends", script, {"Master": 1, "Worker": 1})
    trigger = _stored_trigger(
        test_namespace, "ends", uid, end_from_trigger=True, log_replicas="master", on_finish_action="delete_succeeded"
    )
    capfd.readouterr()
    event = _first_event(trigger)
    out = capfd.readouterr().out

    assert isinstance(event, TaskSuccessEvent)
    summary = (event.xcoms or {})["return_value"]
    assert summary["state"] == "Succeeded" and summary["name"] == "ends" and summary["uid"] == uid
    logged = [line.split("] ", 1)[1].rsplit("  ", 1)[0].strip() for line in out.splitlines() if "] [" in line]
    # the master's log, its last RESUME_LOG_LINES lines (an oversized log is cut, not refused); the worker's not
    assert "[ends-master-0] line 19999" in logged
    assert f"[ends-master-0] line {20000 - RESUME_LOG_LINES}" in logged
    assert f"[ends-master-0] line {20000 - RESUME_LOG_LINES - 1}" not in logged
    assert not any(line.startswith("[ends-worker-0]") for line in logged)
    assert "/ends succeeded" in out
    wait_for(lambda: client.find("PyTorchJob", "ends", test_namespace) is None, 60, "on_finish_action to delete it")


def test_a_failed_job_resumes_the_task_on_a_worker_and_is_kept(embedded_default: Any, test_namespace: str) -> None:
    from airflow_provider_training.hooks.training import TrainingHook

    client = TrainingHook().get_client()
    _, uid = _finished_job(client, test_namespace, "fails", "import sys; print('CUDA error'); sys.exit(3)")
    trigger = _stored_trigger(
        test_namespace, "fails", uid, end_from_trigger=True, log_replicas="all", on_finish_action="delete_succeeded"
    )
    event = _first_event(trigger)
    assert not isinstance(event, TaskSuccessEvent)
    assert event.payload["status"] == "finished" and event.payload["job"]["state"] == "Failed"
    assert client.find("PyTorchJob", "fails", test_namespace) is not None  # the worker's failure report reads it


def test_replica_names_that_match_nothing_and_no_xcom_push_still_end_the_task(
    embedded_default: Any, test_namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    from airflow_provider_training.hooks.training import TrainingHook

    client = TrainingHook().get_client()
    _, uid = _finished_job(client, test_namespace, "quiet", "print('secret-ish output')")
    hostile = ["../../etc/passwd", "master-0; rm -rf /", "x" * 10_000]
    trigger = _stored_trigger(
        test_namespace, "quiet", uid, end_from_trigger=True, log_replicas=hostile, push_summary=False
    )
    capfd.readouterr()
    event = _first_event(trigger)
    out = capfd.readouterr().out
    assert isinstance(event, TaskSuccessEvent) and event.xcoms is None
    assert "quiet succeeded" in out and "secret-ish output" not in out
    assert client.find("PyTorchJob", "quiet", test_namespace) is not None  # on_finish_action: keep


def test_an_old_trigger_row_without_the_new_kwargs_resumes_on_a_worker(
    embedded_default: Any, test_namespace: str
) -> None:
    from airflow_provider_training.hooks.training import TrainingHook

    client = TrainingHook().get_client()
    _, uid = _finished_job(client, test_namespace, "older", "print('ok')")
    kwargs = _stored_trigger(test_namespace, "older", uid).serialize()[1]
    for key in ("end_from_trigger", "log_replicas", "on_finish_action", "push_summary"):
        kwargs.pop(key)  # a row written by the previous version of the provider
    event = _first_event(TrainingJobTrigger(**kwargs))
    assert not isinstance(event, TaskSuccessEvent) and event.payload["status"] == "finished"


def _deferred(embedded_default: Any, namespace: str, **kwargs: Any) -> TrainingJobTrigger:
    from airflow_provider_training.hooks.training import TrainingHook

    operator = PyTorchJobOperator(task_id="train", job=job(name="x"), deferrable=True, **kwargs)
    body = {"kind": "PyTorchJob", "metadata": {"name": "x", "namespace": namespace, "uid": "u1"}}
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute_async(TrainingHook(), body)
    trigger = deferred.value.trigger
    assert isinstance(trigger, TrainingJobTrigger) and deferred.value.method_name == "trigger_reentry"
    return trigger


def test_the_operator_ends_in_the_triggerer_only_where_nothing_needs_a_worker(
    embedded_default: Any, test_namespace: str
) -> None:
    from airflow.sdk.listener import get_listener_manager

    default = _deferred(embedded_default, test_namespace)
    assert default.end_from_trigger and default.log_replicas == "master" and default.on_finish_action == "keep"
    assert not _deferred(embedded_default, test_namespace, end_from_trigger=False).end_from_trigger
    # asset events are emitted by a worker only: with outlets the task resumes there, even when asked
    assert not _deferred(embedded_default, test_namespace, outlets=[Asset("s3://models/x")]).end_from_trigger
    assert not _deferred(
        embedded_default, test_namespace, outlets=[Asset("s3://models/x")], end_from_trigger=True
    ).end_from_trigger
    chosen = _deferred(embedded_default, test_namespace, log_replicas=["worker-1"], do_xcom_push=False)
    assert chosen.log_replicas == ["worker-1"] and chosen.push_summary is False

    class Listener:  # a plugin's listener (or OpenLineage's) hears of a success only from a worker
        pass

    manager = get_listener_manager()
    listener = Listener()
    manager.add_listener(listener)
    try:
        assert not _deferred(embedded_default, test_namespace).end_from_trigger
        assert _deferred(embedded_default, test_namespace, end_from_trigger=True).end_from_trigger
    finally:
        manager.pm.unregister(listener)
