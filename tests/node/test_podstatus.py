"""The kubelet's view of a pod, computed from a supervisor's state without processes or a store."""

from __future__ import annotations

from typing import Any

from airflow_provider_training.embedded.node import podstatus


def running(name: str, restarts: int = 0) -> dict[str, Any]:
    return {"name": name, "restartCount": restarts, "ready": True, "state": {"running": {"startedAt": "t0"}}}


def test_running_state_makes_the_pod_ready_and_keeps_transition_times() -> None:
    status: dict[str, Any] = {}
    podstatus.apply_state(status, {"phase": "Running", "containerStatuses": [running("main")]}, "t1")
    assert status["phase"] == "Running"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert {t: c["status"] for t, c in conditions.items()} == {
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    podstatus.apply_state(status, {"phase": "Running", "containerStatuses": [running("main")]}, "t2")
    assert {c["lastTransitionTime"] for c in status["conditions"]} == {"t1"}  # nothing changed value
    done = {"name": "main", "restartCount": 0, "ready": False, "state": {"terminated": {"exitCode": 0}}}
    podstatus.apply_state(status, {"phase": "Succeeded", "containerStatuses": [done]}, "t3")
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["lastTransitionTime"]) == ("False", "PodCompleted", "t3")


def test_failed_init_container_leaves_the_pod_not_initialized() -> None:
    status: dict[str, Any] = {}
    init = {"name": "init", "restartCount": 0, "state": {"terminated": {"exitCode": 1}}}
    podstatus.apply_state(
        status,
        {"phase": "Failed", "message": "init container init exited with code 1", "initContainerStatuses": [init]},
        "t",
    )
    initialized = next(c for c in status["conditions"] if c["type"] == "Initialized")
    assert (initialized["status"], initialized["reason"]) == ("False", "ContainersNotInitialized")
    assert status["message"] == "init container init exited with code 1"


def test_started_and_backoff_events_once_each() -> None:
    seen = podstatus.Seen()
    state = {"containerStatuses": [running("main")]}
    assert podstatus.container_events(state, seen, "p", "ns", "u") == [("Normal", "Started", "Started container main")]
    assert podstatus.container_events(state, seen, "p", "ns", "u") == []
    crash = {"name": "main", "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    events = podstatus.container_events({"containerStatuses": [crash]}, seen, "p", "ns", "u")
    assert events == [("Warning", "BackOff", "Back-off restarting failed container main in pod p_ns(u)")]
    assert podstatus.container_events({"containerStatuses": [crash]}, seen, "p", "ns", "u") == []
    assert podstatus.container_events({"containerStatuses": [running("main", 1)]}, seen, "p", "ns", "u") == [
        ("Normal", "Started", "Started container main")
    ]


def test_cannot_start_waits_with_the_kubelets_reason() -> None:
    status: dict[str, Any] = {}
    event = podstatus.cannot_start(
        status, [{"name": "main", "image": "i"}], "CreateContainerConfigError", 'configmap "c" not found'
    )
    assert event == ("Warning", "Failed", 'Error: configmap "c" not found')
    waiting = status["containerStatuses"][0]["state"]["waiting"]
    assert (status["phase"], waiting["reason"]) == ("Pending", "CreateContainerConfigError")
    event = podstatus.cannot_start(status, [{"name": "main"}], "FailedMount", "no volume")
    assert event == ("Warning", "FailedMount", "no volume")
    assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"


def test_lost_pod_ends_running_containers_with_137() -> None:
    status: dict[str, Any] = {"phase": "Running", "containerStatuses": [running("main")]}
    podstatus.lost(status, stopped=True, now="t9")
    assert (status["phase"], status["reason"]) == ("Failed", "NodeLost")
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["startedAt"], terminated["finishedAt"]) == (137, "t0", "t9")
    assert status["containerStatuses"][0]["ready"] is False


def test_unschedulable() -> None:
    status: dict[str, Any] = {}
    event = podstatus.unschedulable(status, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.", "t")
    assert event[1] == "FailedScheduling" and status["conditions"][0]["reason"] == "Unschedulable"


def test_a_start_is_announced_even_when_the_container_is_first_seen_ended() -> None:
    seen = podstatus.Seen()
    done = {"name": "main", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    assert podstatus.container_events({"containerStatuses": [done]}, seen, "p", "ns", "u") == [
        ("Normal", "Started", "Started container main")
    ]
    assert podstatus.container_events({"containerStatuses": [done]}, seen, "p", "ns", "u") == []
    # first seen in its crash-loop wait after run 0: run 0 started, then the back-off
    seen = podstatus.Seen()
    crash = {
        "name": "main",
        "restartCount": 1,
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
    }
    reasons = [e[1] for e in podstatus.container_events({"containerStatuses": [crash]}, seen, "p", "ns", "u")]
    assert reasons == ["Started", "BackOff"]
    # a container that could not be started is never announced as started
    failed = {"name": "main", "restartCount": 0, "state": {"terminated": {"exitCode": 128, "reason": "StartError"}}}
    assert podstatus.container_events({"containerStatuses": [failed]}, podstatus.Seen(), "p", "ns", "u") == []
