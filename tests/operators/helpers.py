"""DAG sources and job scripts shared by the Airflow-level tests."""

from __future__ import annotations

from typing import Any

from tests.factories import simple_job as job
from tests.fixtures.job_driver import JobDriver

HEADER = """
from datetime import datetime, timedelta
from airflow.sdk import DAG, Param
from airflow_provider_training.operators import *  # noqa: F403
from airflow_provider_training.sensors import TrainingJobSensor
"""


def dag_file(dag_id: str, body: str, params: str = "{}") -> str:
    return (
        HEADER
        + f"""
with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, params={params}) as dag:
"""
        + "\n".join("    " + line for line in body.strip().splitlines())
        + "\n"
    )


def job_literal(
    kind: str = "PyTorchJob", name: str = "mnist", replicas: dict[str, int] | None = None, script: str | None = None
) -> str:
    """A job document as Python source; ``script`` makes it a real job (else a driven one)."""
    return repr(job(kind, name, replicas, script=script))


def xcom(ti: Any, key: str) -> Any:
    return ti.xcom_pull(task_ids=ti.task_id, key=key)


def succeed(delay: float = 0.0) -> Any:
    """Autopilot script for a driven job: Running, then Succeeded after ``delay``."""

    def script(driver: JobDriver, job: dict[str, Any]) -> None:
        import time

        meta = job["metadata"]
        kind, name, ns = job["kind"], meta["name"], meta["namespace"]
        driver.start(kind, name, ns, {rtype: spec.get("replicas", 1) for rtype, spec in _replica_specs(job).items()})
        time.sleep(delay)
        driver.succeed(kind, name, ns)

    return script


def _replica_specs(job: dict[str, Any]) -> dict[str, Any]:
    from airflow_provider_training.specs.kinds import KINDS

    return dict(job["spec"][KINDS[job["kind"]].replica_specs_field])


def user_kill_message() -> str | None:
    """What the installed triggerer cancels a trigger with when a user marks its task failed / success
    or clears it, and then calls its ``on_kill`` (3.3+); None on 3.2, whose triggerer cancels a
    trigger the same way for that as for a restart and never calls ``on_kill``."""
    from airflow.jobs import triggerer_job_runner

    return getattr(triggerer_job_runner, "_USER_ACTION_CANCEL_MSG", None)


async def run_trigger(trigger: Any) -> dict[str, Any]:
    """A trigger run as the installed triggerer's ``run_trigger`` runs it: its first event's payload;
    ``on_kill`` when a user's kill cancels it (3.3+), ``cleanup`` whatever ends it."""
    import asyncio

    try:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError(f"{trigger!r} ended without an event")
    except asyncio.CancelledError as exc:
        if exc.args and exc.args[0] is not None and exc.args[0] == user_kill_message():
            await trigger.on_kill()
        raise
    finally:
        await trigger.cleanup()
