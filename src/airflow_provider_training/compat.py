"""What differs between the Airflow versions the provider supports (3.2, 3.3, 3.4), in one place.

Everything else the provider uses behaves the same on 3.2.2, 3.3.2 and 3.4.0b2 (each run in CI's
Airflow-version tier, ``tools/airflow_versions.py``): the ``airflow.sdk`` names (``BaseOperator``,
``BaseSensorOperator``, ``PokeReturnValue``, ``BaseHook``, ``BaseOperatorLink``, ``Asset``,
``AssetAlias``, ``conf``, the exceptions), ``airflow.triggers.base`` (``BaseTrigger``,
``TriggerEvent``), ``defer()`` and resuming, the UI plugin's ``fastapi_apps`` / ``react_apps``, the
declarative connection forms (``conn-fields``, 3.2+), and Human-in-the-loop's ``ApprovalOperator``
(the standard provider's: on 3.2 it waits in the triggerer through ``HITLTrigger``, on 3.3+ in the
``awaiting_input`` state; the approval flow is the same for the person answering, except under
``dag.test()`` on 3.2: :func:`approval_unsupported`).

Only this module compares Airflow versions; the call sites ask it what they need.
"""

from __future__ import annotations

from importlib.metadata import version as _distribution_version
from typing import Any

from packaging.version import Version

# From the installed distribution, not ``airflow.__version__``: importing ``airflow`` initialises its
# configuration, which reads this provider's ``get_provider_info()``, which reads this module.
_airflow_version = _distribution_version("apache-airflow-core")


def _release(version: str) -> tuple[int, int, int]:
    """``"3.4.0b2"`` → ``(3, 4, 0)``: a pre-release counts as its release (a beta of 3.4 has 3.4's APIs)."""
    major, minor, micro = (*Version(version).release, 0, 0)[:3]
    return major, minor, micro


AIRFLOW_VERSION = _release(_airflow_version)

# The task state store (``context["task_state_store"]``, AIP-103) is new in 3.3. Without it a retry
# after a worker crash finds its running job through the identity labels alone (operators/identity.py).
TASK_STATE_STORE = AIRFLOW_VERSION >= (3, 3, 0)

# From 3.3 the triggerer calls ``BaseTrigger.on_kill()`` when a user marks a deferred task
# failed/success or clears it (and not on a triggerer restart). 3.2's triggerer only cancels the
# trigger, the same way for both, so a deferred task's ``on_kill_action`` cannot apply there.
TRIGGER_ON_KILL = AIRFLOW_VERSION >= (3, 3, 0)

# The deferral race (triggers/settle.py): the scheduler fails a resumed task when it drains the
# deferring worker's exit ("success") only after the trigger already moved the task on. Which state
# the resumed task may be in at that moment without being failed, from which release on (read in
# SchedulerJobRunner.process_executor_events of each release):
#   scheduled  apache/airflow#66374, fixed by #66431 (in 3.3.2; backported to 3.2.2 by #67089)
#   queued     apache/airflow#67287, fixed by #68741 (in 3.4.0b2; not in 3.3.2 nor 3.2.2)
#   running    apache/airflow#72716, open (#71579, #72767): no release exempts it by state (3.4.0b2's
#              LocalExecutor keeps dispatched workloads in ``running``, so ``has_task()`` may spare
#              it there; 3.3's does not, and other executors differ)
RACE_TOLERATED_SINCE: dict[str, tuple[int, int, int] | None] = {
    "scheduled": (3, 2, 2),
    "queued": (3, 4, 0),
    "running": None,
}
GUARD_SECONDS = 10.0

# Human-in-the-loop parks a task in ``awaiting_input`` from 3.3 on. 3.2's ApprovalOperator defers to
# HITLTrigger, which reads the answer through the triggerer's supervisor: the in-process supervisor of
# ``dag.test()`` / ``airflow dags test`` does not answer that request, and the trigger crashes.
HITL_AWAITING_INPUT = AIRFLOW_VERSION >= (3, 3, 0)


def race_tolerated(version: tuple[int, int, int] = AIRFLOW_VERSION) -> set[str]:
    """The resumed states in which a stale defer-exit success no longer fails the task."""
    return {state for state, since in RACE_TOLERATED_SINCE.items() if since is not None and version >= since}


def default_settle_seconds(version: tuple[int, int, int] = AIRFLOW_VERSION) -> float:
    """``[training] defer_settle_seconds``' default: 0 once the scheduler tolerates every variant of
    the race, the guard until then (every release up to 3.4.0b2)."""
    return 0.0 if race_tolerated(version) >= set(RACE_TOLERATED_SINCE) else GUARD_SECONDS


def task_state_store(context: Any) -> Any:
    """The task state store of this try (3.3+), else None: the callers fall back to what works on
    every version (reattach by identity labels)."""
    return context.get("task_state_store") if TASK_STATE_STORE else None


def approval_unsupported() -> str | None:
    """Why an approval cannot be answered in this task's process (None: it can)."""
    if HITL_AWAITING_INPUT:
        return None
    from airflow.sdk.execution_time import supervisor, task_runner

    if not isinstance(getattr(task_runner, "SUPERVISOR_COMMS", None), supervisor.InProcessSupervisorComms):
        return None
    return (
        f"an approval cannot be answered under dag.test() / 'airflow dags test' on Airflow {_airflow_version}: "
        "its HITLTrigger needs a triggerer (Airflow 3.3 and later need none). Run the DAG in a deployment "
        "with a triggerer, or turn the approval off (enabled=False, e.g. the DAG's approve_deploy param)"
    )


def deferred_kill_unsupported(on_kill_action: str) -> str | None:
    """Why ``on_kill_action`` will not apply while the task is deferred on this Airflow (None: it will)."""
    if TRIGGER_ON_KILL or on_kill_action == "keep":
        return None
    return (
        f"on_kill_action={on_kill_action!r} does not apply while this task is deferred: Airflow "
        f"{_airflow_version}'s triggerer cancels a trigger the same way for a user's mark failed / "
        "success / clear as for a triggerer restart, so a kill of the deferred task leaves the object "
        "in place (Airflow 3.3 and later apply it; deferrable=False applies it on every version)"
    )


def task_listeners() -> bool:
    """Whether listeners (OpenLineage when configured, a plugin's own) watch this worker's tasks: they
    hear of a task's success only from a worker, never from a triggerer that ends it."""
    try:
        from airflow.sdk.listener import get_listener_manager
    except ImportError:  # an Airflow without the SDK's listener manager: assume there are some
        return True
    return get_listener_manager().has_listeners


def triggers_run_inline() -> bool:
    """Whether this task runs under ``dag.test()``, which runs a deferred task's trigger in the task's
    own process and resumes the task with whatever event it yields — an event that ends the task
    (``TaskSuccessEvent``) included, so there the trigger must not end it."""
    from airflow.sdk.execution_time import task_runner

    return type(getattr(task_runner, "SUPERVISOR_COMMS", None)).__name__ == "InProcessSupervisorComms"
