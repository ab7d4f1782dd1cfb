"""The pod status and events a kubelet would report, computed from what the node knows: pure
functions from a supervisor's ``state.json`` (or a reason the pod cannot start, or a lost
supervisor) to ``status`` fields and ``(type, reason, message)`` events. No I/O, no processes:
the agent reads the state and writes the results (``agent``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TERMINAL = ("Succeeded", "Failed")
NEVER_RAN = ("StartError", "ContainerCannotRun")  # terminated reasons of a container that did not start
Event = tuple[str, str, str]  # (type, reason, message)
IMAGE_REASONS = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName")
LOST_STOPPED = "the pod's supervisor ended unexpectedly; its containers were stopped"
LOST_GONE = "the pod's processes were lost (no supervisor state under the data directory)"


@dataclass
class Seen:
    """What was already announced for one pod, so that each event is recorded once."""

    started: dict[str, int] = field(default_factory=dict)  # container -> restart count announced
    backoff: set[tuple[str, int]] = field(default_factory=set)
    failed: set[tuple[str, str]] = field(default_factory=set)  # (container, message) of a start not made


def apply_state(status: dict[str, Any], state: dict[str, Any], now: str) -> None:
    """Copy a supervisor's state into ``status``: phase, message, container statuses, and the
    conditions, keeping each condition's ``lastTransitionTime`` while its value holds."""
    phase = state.get("phase") or "Pending"
    status["phase"] = phase
    if state.get("message"):
        status["message"] = state["message"]
    if state.get("initContainerStatuses"):
        status["initContainerStatuses"] = state["initContainerStatuses"]
    status["containerStatuses"] = state.get("containerStatuses") or []
    inits_done = all(
        "terminated" in (c.get("state") or {}) and c["state"]["terminated"].get("exitCode") == 0
        for c in state.get("initContainerStatuses") or []
    )
    ready = phase == "Running" and all(c.get("ready") for c in status["containerStatuses"])
    why = "PodCompleted" if phase in TERMINAL else "ContainersNotReady"
    wanted = [
        ("Initialized", inits_done, "" if inits_done else "ContainersNotInitialized"),
        ("Ready", ready, "" if ready else why),
        ("ContainersReady", ready, "" if ready else why),
        ("PodScheduled", True, ""),
    ]
    old = {c["type"]: c for c in status.get("conditions") or []}
    conditions = []
    for type_, ok, reason in wanted:
        value = "True" if ok else "False"
        previous = old.get(type_)
        stamp = previous["lastTransitionTime"] if previous and previous.get("status") == value else now
        condition: dict[str, Any] = {"type": type_, "status": value, "lastProbeTime": None, "lastTransitionTime": stamp}
        if reason:
            condition["reason"] = reason
        conditions.append(condition)
    status["conditions"] = conditions


def container_events(state: dict[str, Any], seen: Seen, pod: str, namespace: str, uid: str) -> list[Event]:
    """``Started`` once per container start, ``BackOff`` once per crash-loop wait and ``Failed`` once
    per reason a start could not be made (a subPath that leads out of its volume). A start is
    announced even when the state read next shows the container already ended (the agent reads the
    latest state only, so a short-lived container may never be seen running)."""
    events: list[Event] = []
    for c in (state.get("initContainerStatuses") or []) + (state.get("containerStatuses") or []):
        name, restarts, current = c["name"], int(c.get("restartCount", 0)), c.get("state") or {}
        run = last_started_run(c)
        if run is not None and seen.started.get(name, -1) < run:
            seen.started[name] = run
            events.append(("Normal", "Started", f"Started container {name}"))
        waiting = current.get("waiting") or {}
        if (
            waiting.get("reason") == "CreateContainerConfigError"
            and (name, waiting.get("message", "")) not in seen.failed
        ):
            seen.failed.add((name, waiting.get("message", "")))
            events.append(("Warning", "Failed", f"Error: {waiting.get('message', '')}"))
        if waiting.get("reason") == "CrashLoopBackOff" and (name, restarts) not in seen.backoff:
            seen.backoff.add((name, restarts))
            events.append(
                (
                    "Warning",
                    "BackOff",
                    f"Back-off restarting failed container {name} in pod {pod}_{namespace}({uid})",
                )
            )
    return events


def last_started_run(container: dict[str, Any]) -> int | None:
    """The last run (its restart count) of a container status known to have started: the running
    or ended one, or the one before a crash-loop wait; None when none started (a start error)."""
    restarts, current = int(container.get("restartCount", 0)), container.get("state") or {}
    if "running" in current:
        return restarts
    if _ran(current.get("terminated") or None):
        return restarts
    if _ran((container.get("lastState") or {}).get("terminated") or None):
        return restarts - 1
    return None


def _ran(terminated: dict[str, Any] | None) -> bool:
    return terminated is not None and terminated.get("reason") not in NEVER_RAN


def cannot_start(status: dict[str, Any], containers: list[dict[str, Any]], reason: str, message: str) -> Event:
    """A pod whose containers cannot be created: ``Pending`` with the kubelet's waiting reason on
    each container (``ContainerCreating`` while a volume cannot be mounted), and its event."""
    status["phase"] = "Pending"
    status["containerStatuses"] = [
        {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "started": False,
            "state": {
                "waiting": {"reason": reason if reason != "FailedMount" else "ContainerCreating", "message": message}
            },
        }
        for c in containers
    ]
    if reason == "FailedMount":
        return ("Warning", "FailedMount", message)
    if reason in IMAGE_REASONS:  # the registry's answer is in the pull's own event (``oci.containerruntime``)
        return ("Warning", "Failed", f"Error: {reason}")
    return ("Warning", "Failed", f"Error: {message}")


def unschedulable(status: dict[str, Any], message: str, now: str) -> Event:
    status["phase"] = "Pending"
    status["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": now,
        }
    ]
    return ("Warning", "FailedScheduling", message)


def lost(status: dict[str, Any], stopped: bool, now: str) -> None:
    """The pod's supervisor is gone: ``Failed`` (``NodeLost``); containers that were running end
    with exit code 137 (they were stopped, or are gone with the processes)."""
    status["phase"] = "Failed"
    status["reason"] = "NodeLost"
    status["message"] = LOST_STOPPED if stopped else LOST_GONE
    for c in status.get("containerStatuses") or []:
        if isinstance(c, dict) and "running" in (c.get("state") or {}):
            started = c["state"]["running"].get("startedAt")
            c["state"] = {
                "terminated": {
                    "exitCode": 137,
                    "reason": "Error",
                    "message": status["message"],
                    "startedAt": started,
                    "finishedAt": now,
                }
            }
            c["ready"] = c["started"] = False
