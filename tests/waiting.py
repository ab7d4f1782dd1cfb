"""Waiting in tests: one ``wait_for`` (and its ``await``-able twin) with one argument order, and
``alive`` for a process id. Timeouts are the caller's, generous: the full suite runs on loaded
2-core machines."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float, what: str | Callable[[], str], *, interval: float = 0.02) -> T:
    """Call ``check`` every ``interval`` seconds until it returns something true, and return that;
    after ``timeout`` seconds fail naming ``what`` (a callable is asked then, e.g. for the last
    status) and the last value."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {_said(what)} (last: {value!r})")
        time.sleep(interval)
    return value


async def wait_for_async(
    check: Callable[[], T], timeout: float, what: str | Callable[[], str], *, interval: float = 0.1
) -> T:
    """``wait_for`` inside an event loop: ``check`` runs in a thread (it may block on HTTP) and the
    loop keeps serving the watches the test is about."""
    deadline = time.monotonic() + timeout
    while not (value := await asyncio.to_thread(check)):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {_said(what)} (last: {value!r})")
        await asyncio.sleep(interval)
    return value


def _said(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: it exists and is not a zombie (a zombie has exited; only its parent has
    not read its status yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # the state follows the command name, which may itself hold spaces and parentheses
    fields = stat[stat.rfind(")") + 2 :].split()
    return bool(fields) and fields[0] != "Z"
