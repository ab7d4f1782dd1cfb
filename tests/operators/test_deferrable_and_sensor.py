"""Deferrable operators, the trigger's on_kill, and TrainingJobSensor in poke / reschedule /
deferrable modes, in real Airflow runs (``dag.test()`` runs triggers inline)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from airflow_provider_training import compat
from airflow_provider_training.triggers import TrainingJobTrigger
from tests.factories import simple_job as job
from tests.operators.helpers import dag_file, job_literal, run_trigger, user_kill_message, xcom


def test_deferrable_success_prints_logs_on_resume(run_dag: Any, test_namespace: str, capfd: Any) -> None:
    script = "import time; time.sleep(1); print('epoch 1 loss 0.4')"
    dr = run_dag(
        dag_file(
            "deferred_ok",
            f'''
PyTorchJobOperator(task_id="train", job={job_literal(script=script)}, namespace="{test_namespace}", deferrable=True)
''',
        ),
        "deferred_ok",
    )
    ti = dr.get_task_instance("train")
    assert ti.state == "success"
    assert xcom(ti, "return_value")["state"] == "Succeeded"
    assert xcom(ti, "job_name") == "mnist"
    out = "".join(capfd.readouterr())
    assert "Pausing task as DEFERRED" in out
    assert "[mnist-master-0] epoch 1 loss 0.4" in out
    # dag.test() runs the trigger inline and resumes with any event, so there the task resumes and
    # finishes (once) instead of ending in the trigger
    assert out.count("/mnist succeeded") == 1, out[-3000:]


def test_deferrable_failure_carries_the_reason(run_dag: Any, test_namespace: str, capfd: Any) -> None:
    script = "import sys, time; time.sleep(0.5); print('CUDA error'); sys.exit(3)"
    dr = run_dag(
        dag_file(
            "deferred_fail",
            f'''
PyTorchJobOperator(task_id="train", job={job_literal(script=script)}, namespace="{test_namespace}", deferrable=True)
''',
        ),
        "deferred_fail",
    )
    assert dr.get_task_instance("train").state == "failed"
    out = "".join(capfd.readouterr())
    assert "Failed replicas: mnist-master-0 (exit code 3, Error)" in out and "  CUDA error" in out


def test_trigger_on_kill_deletes_the_job_only_on_a_user_kill(
    embedded_default: Any, job_driver: Any, test_namespace: str
) -> None:
    """Run the trigger as the installed triggerer does, then cancel it the two ways Airflow 3.3+ does:
    a restart keeps the job, a user's kill deletes it. Airflow 3.2 cancels both ways alike and keeps it
    (what the task log says then: test_airflow_versions)."""
    from airflow_provider_training.hooks.training import TrainingHook

    client = TrainingHook().get_client()
    created = client.create(job(name="deferred"), namespace=test_namespace)
    job_driver.start("PyTorchJob", "deferred", test_namespace)
    uid = created["metadata"]["uid"]

    async def cancel(message: str | None) -> None:
        trigger = TrainingJobTrigger(
            "PyTorchJob",
            "deferred",
            test_namespace,
            uid,
            **TrainingHook().trigger_connection(),
            on_kill_action="delete",
        )
        task = asyncio.ensure_future(run_trigger(trigger))
        await asyncio.sleep(0.5)
        task.cancel(message) if message else task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(cancel(None))  # triggerer restart / redistribution: the job keeps running
    assert client.find("PyTorchJob", "deferred", test_namespace) is not None
    asyncio.run(cancel(user_kill_message()))  # mark failed / success / clear
    killed = client.find("PyTorchJob", "deferred", test_namespace) is None
    assert killed == compat.TRIGGER_ON_KILL


def _sensor_dag(dag_id: str, namespace: str, name: str, **kwargs: Any) -> str:
    extra = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return dag_file(
        dag_id,
        f'''
TrainingJobSensor(task_id="wait", job_name="{name}", kind="PyTorchJob", namespace="{namespace}",
                  poke_interval=0.5, timeout=30, {extra})
''',
    )


def test_sensor_in_all_modes(run_dag: Any, job_driver: Any, test_namespace: str) -> None:
    from airflow_provider_training.hooks.training import TrainingHook

    client = TrainingHook().get_client()
    for mode, extra in (
        ("poke", {"mode": "poke"}),
        ("reschedule", {"mode": "reschedule"}),
        ("deferrable", {"deferrable": True}),
    ):
        name = f"elsewhere-{mode}"
        client.create(job(name=name), namespace=test_namespace)
        job_driver.start("PyTorchJob", name, test_namespace)
        job_driver.later(1.5, lambda n=name: job_driver.succeed("PyTorchJob", n, test_namespace))
        dr = run_dag(_sensor_dag(f"sense_{mode}", test_namespace, name, **extra), f"sense_{mode}")
        ti = dr.get_task_instance("wait")
        assert ti.state == "success", mode
        assert xcom(ti, "return_value")["state"] == "Succeeded", mode


def test_sensor_fails_with_the_reason_or_skips_with_soft_fail(
    run_dag: Any, job_driver: Any, test_namespace: str, capfd: Any
) -> None:
    from airflow_provider_training.hooks.training import TrainingHook

    client = TrainingHook().get_client()
    client.create(job(name="broken"), namespace=test_namespace)
    job_driver.start("PyTorchJob", "broken", test_namespace)
    job_driver.fail("PyTorchJob", "broken", test_namespace)
    dr = run_dag(_sensor_dag("sense_failed", test_namespace, "broken"), "sense_failed")
    assert dr.get_task_instance("wait").state == "failed"
    assert "PyTorchJobFailed: PyTorchJob broken is failed because 1 Master replica(s) failed." in "".join(
        capfd.readouterr()
    )
    dr = run_dag(_sensor_dag("sense_soft", test_namespace, "broken", soft_fail=True), "sense_soft")
    assert dr.get_task_instance("wait").state == "skipped"
    dr = run_dag(
        _sensor_dag("sense_soft_deferred", test_namespace, "broken", soft_fail=True, deferrable=True),
        "sense_soft_deferred",
    )
    assert dr.get_task_instance("wait").state == "skipped"


def test_a_job_that_ends_right_after_the_deferral_is_reported_after_the_settle_time(
    embedded_default: Any, job_driver: Any, test_namespace: str, monkeypatch: Any
) -> None:
    """The guard against Airflow's deferral race (apache/airflow#66374): the event waits until
    ``[training] defer_settle_seconds`` after the deferral, and that moment survives serialization."""
    import time

    from airflow_provider_training.hooks.training import TrainingHook

    client = TrainingHook().get_client()
    uid = client.create(job(name="quick"), namespace=test_namespace)["metadata"]["uid"]
    job_driver.start("PyTorchJob", "quick", test_namespace)
    job_driver.succeed("PyTorchJob", "quick", test_namespace)

    monkeypatch.setenv("AIRFLOW__TRAINING__DEFER_SETTLE_SECONDS", "2")
    deferred_at = time.time()
    created = TrainingJobTrigger("PyTorchJob", "quick", test_namespace, uid, **TrainingHook().trigger_connection())
    monkeypatch.setenv("AIRFLOW__TRAINING__DEFER_SETTLE_SECONDS", "0")
    # as the triggerer builds it from the stored kwargs (its own config does not matter)
    trigger = TrainingJobTrigger(**created.serialize()[1])
    assert trigger.not_before >= deferred_at + 2

    async def first_event() -> tuple[dict[str, Any], float]:
        async for event in trigger.run():
            return event.payload, time.time()
        raise AssertionError("no event")

    payload, fired_at = asyncio.run(first_event())
    assert payload["status"] == "finished" and payload["job"]["state"] == "Succeeded"
    assert fired_at >= deferred_at + 2

    # a trigger of the previous version (no not_before stored) still resumes: settle from now
    old = {k: v for k, v in created.serialize()[1].items() if k != "not_before"}
    assert TrainingJobTrigger(**old).not_before <= time.time()
