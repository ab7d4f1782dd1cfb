"""The container processes a dead supervisor left behind.

Each container runs as the leader of its own process group (``start_new_session``). The supervisor
records, for every running container, the leader's pid and its start time (``/proc/<pid>/stat``
field 22), so that after the supervisor dies the node agent can tell its processes from a later
process that got the same pid, and stop them before it decides the pod's fate: a pod is never
reported finished while its process runs, and a replacement never runs beside the original.
Standard library only (the supervisor imports it).
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None (no such process, no /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            text = handle.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its closing one
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[19]) if fields[0] != "Z" else None


def record(pid: int) -> dict[str, Any]:
    return {"pid": pid, "start": start_time(pid)}


def group_alive(entry: dict[str, Any]) -> bool:
    """Whether the process group the container led still has a member that is ours."""
    pid = int(entry["pid"])
    started = start_time(pid)
    if started is not None:
        # the leader lives: ours only when it is the same process (pids are reused)
        return entry.get("start") is None or started == entry["start"]
    # The leader is gone; a pid still used as a group id cannot be reused, so members are ours.
    try:
        os.killpg(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def signal_group(entry: dict[str, Any], sig: int) -> None:
    if group_alive(entry):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(entry["pid"]), sig)


def left_behind(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The recorded container processes of a supervisor's last state that still run."""
    entries = state.get("processes") or {}
    return [e for e in entries.values() if isinstance(e, dict) and "pid" in e and group_alive(e)]


def stop(entries: list[dict[str, Any]], force: bool) -> None:
    for entry in entries:
        signal_group(entry, signal.SIGKILL if force else signal.SIGTERM)
