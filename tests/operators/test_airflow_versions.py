"""What differs between the supported Airflow versions (``airflow_provider_training.compat``), held
against the installed Airflow itself. The main suite runs this on 3.3; CI's Airflow-version tier
(``tools/airflow_versions.py``) on the lowest supported release and the newest pre-release, so a
release that changes one of these facts fails here instead of in a user's deployment."""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest

from airflow_provider_training import compat
from airflow_provider_training.triggers import settle
from tests.operators.helpers import dag_file, job_literal

RESUMED = ("SCHEDULED", "QUEUED", "RUNNING")


def _scheduler_tolerates() -> set[str]:
    """The resumed states in which the installed scheduler ignores a stale defer-exit success: those
    its resume-after-defer clause exempts, plus any it no longer counts as "queued" at all."""
    from airflow.jobs.scheduler_job_runner import SchedulerJobRunner

    source = inspect.getsource(SchedulerJobRunner.process_executor_events)
    queued = re.search(r"ti_queued = (.*?)\n\s*ti_requeued = ", source, re.S)
    requeued = re.search(r"ti_requeued = \((.*?)\n\s*if ti_queued and not ti_requeued", source, re.S)
    assert queued and requeued, "process_executor_events changed shape: read it and update compat's race table"
    exempt = (
        {
            s
            for line in requeued[1].splitlines()
            if "ti.state" in line
            for s in re.findall(r"TaskInstanceState\.(\w+)", line)
        }
        if "next_method" in requeued[1]
        else set()
    )
    counted = set(re.findall(r"TaskInstanceState\.(\w+)", queued[1]))
    return {s.lower() for s in RESUMED if s in exempt or s not in counted}


def test_the_deferral_race_table_matches_the_installed_scheduler() -> None:
    tolerated = _scheduler_tolerates()
    assert compat.race_tolerated() == tolerated, (
        f"Airflow {compat.AIRFLOW_VERSION} tolerates a stale defer-exit success in {sorted(tolerated)}: "
        "update compat.RACE_TOLERATED_SINCE and README's table of the race"
    )


def test_the_settle_default_is_the_guard_until_every_variant_is_tolerated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__TRAINING__DEFER_SETTLE_SECONDS", raising=False)  # conftest sets 0
    expected = 0.0 if _scheduler_tolerates() >= {s.lower() for s in RESUMED} else 10.0
    assert settle.settle_seconds() == expected
    # the switch itself: the release that tolerates the last open variant drops the guard
    monkeypatch.setitem(compat.RACE_TOLERATED_SINCE, "running", (3, 5, 0))
    monkeypatch.setitem(compat.RACE_TOLERATED_SINCE, "queued", (3, 4, 0))
    assert compat.default_settle_seconds((3, 4, 0)) == 10.0
    assert compat.default_settle_seconds((3, 5, 0)) == 0.0
    # a user's setting wins on every version; a negative one means none
    monkeypatch.setenv("AIRFLOW__TRAINING__DEFER_SETTLE_SECONDS", "-5")
    assert settle.settle_seconds() == 0.0


def test_the_version_flags_match_the_installed_airflow() -> None:
    import airflow.sdk.exceptions
    from airflow.sdk.definitions.context import Context
    from airflow.triggers.base import BaseTrigger

    assert hasattr(BaseTrigger, "on_kill") == compat.TRIGGER_ON_KILL
    assert hasattr(airflow.sdk.exceptions, "TaskAwaitingInput") == compat.HITL_AWAITING_INPUT
    assert ("task_state_store" in Context.__annotations__) == compat.TASK_STATE_STORE
    assert compat.task_state_store({"task_state_store": "the store"}) == (
        "the store" if compat.TASK_STATE_STORE else None
    )


@pytest.mark.parametrize(("given", "expected"), [("3.4.0b2", (3, 4, 0)), ("3.2.2", (3, 2, 2)), ("3.10", (3, 10, 0))])
def test_a_pre_release_counts_as_its_release(given: str, expected: tuple[int, int, int]) -> None:
    assert compat._release(given) == expected


def test_a_deferred_task_whose_kill_cannot_apply_says_so(
    run_dag: Any, autopilot: Any, test_namespace: str, capfd: Any
) -> None:
    """On an Airflow whose triggerer never calls a trigger's on_kill (3.2), the task log says that
    ``on_kill_action`` will not apply while deferred; on 3.3+ nothing is said."""
    from airflow.triggers.base import BaseTrigger

    from tests.operators.helpers import succeed

    pilot = autopilot("PyTorchJob", test_namespace, "airflow-training/dag-id=kill_note", succeed(2.0))
    dr = run_dag(
        dag_file(
            "kill_note",
            f'''
PyTorchJobOperator(task_id="train", job={job_literal()}, namespace="{test_namespace}", deferrable=True)
''',
        ),
        "kill_note",
    )
    pilot.stop()
    assert dr.get_task_instance("train").state == "success"
    out = "".join(capfd.readouterr())
    assert "Pausing task as DEFERRED" in out
    said = "on_kill_action='delete' does not apply while this task is deferred" in out
    assert said == (not hasattr(BaseTrigger, "on_kill")), out[-3000:]
