"""Waiting for an object: the watch → 410 → relist → reconnect → poll → deadline rules, written once.

Three parts kept apart, as kopf keeps its stream, block and loop apart:

- :class:`Waiter` — the rules, a pure state machine: fed what happened (the object was listed, a
  watch event arrived, the watch ended or failed, a list failed), it answers with what to do next
  (:class:`Relist`, :class:`Watch`, :class:`Done`, or :data:`READ_ON` to keep reading) or raises
  :class:`WaitTimeout` / :class:`JobDeleted`. No I/O; time comes from ``clock``.
- :func:`watch_once` — one watch request: lines → events → the Waiter (``watching.parse_event``).
- :func:`wait` — the loop that asks for lists, watches and sleeps (``steps.py``), which the sync and
  async clients answer with their own I/O.

The rules: watch from the resourceVersion of the last LIST (bookmarks move it), one watch request
per ``watch_timeout`` seconds while nothing changes; after ``410 Gone`` list again at once (a second
410 in a row backs off); after a dropped connection or a server error back off (0.5 s doubling up
to ``poll_interval``) and list again; a server that cannot watch the resource (400, 404, 405, 501 to
a watch) is polled every ``poll_interval`` from then on; the deadline is checked before every watch
and after every event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_provider_training.client import operations as op
from airflow_provider_training.client.errors import ApiError, Gone, JobDeleted, Transient, WaitTimeout
from airflow_provider_training.client.resources import resource_for
from airflow_provider_training.client.steps import READ_ON, ReadOn, Sleep, Steps
from airflow_provider_training.client.watching import Cursor, parse_event

Predicate = Callable[[dict[str, Any]], bool]
FIRST_BACKOFF = 0.5


class Settings(Protocol):
    """What a wait reads from its client (``can_watch`` is remembered across waits)."""

    watch_timeout: float
    poll_interval: float
    can_watch: bool


@dataclass(frozen=True)
class Relist:
    """Read the object again (a LIST, for a current resourceVersion), after ``after`` seconds."""

    after: float = 0.0


@dataclass(frozen=True)
class Watch:
    """Watch from ``resource_version`` for ``seconds`` (after ``after`` seconds: a follow resuming
    after a dropped connection)."""

    resource_version: str
    seconds: float
    after: float = 0.0


@dataclass(frozen=True)
class Done:
    obj: dict[str, Any]


Action = Relist | Watch | Done | ReadOn


class Waiter:
    """The rules of one wait for ``kind`` ``namespace/name`` (and, with ``uid``, that very object)."""

    def __init__(
        self,
        kind: str,
        name: str,
        namespace: str,
        settings: Settings,
        *,
        uid: str | None = None,
        timeout: float | None = None,
        until: Predicate,
        on_change: Callable[[dict[str, Any]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kind, self.name, self.namespace, self.uid = kind, name, namespace, uid
        self.settings, self.until, self.on_change, self.clock = settings, until, on_change, clock
        self.timeout = timeout
        self.deadline = None if timeout is None else clock() + timeout
        self.obj: dict[str, Any] | None = None
        self.cursor = Cursor("")
        self.backoff = FIRST_BACKOFF
        self.gone = False  # the last watch ended with 410

    # -- what happened ------------------------------------------------------------------------------
    def listed(self, obj: dict[str, Any], resource_version: str) -> Action:
        self.obj, self.cursor.resource_version = obj, resource_version
        return self._observe(obj)

    def list_failed(self, error: ApiError) -> Action:
        if not isinstance(error, Transient):
            raise error
        if self._expired():
            raise self._timeout() from error
        return Relist(self._back_off())

    def event(self, type_: str, obj: dict[str, Any]) -> Action:
        if type_ == "DELETED":
            raise JobDeleted(self.kind, self.namespace, self.name)
        if self.uid and obj["metadata"].get("uid") != self.uid:
            raise JobDeleted(self.kind, self.namespace, self.name, "was replaced by another object of the same name")
        self.obj, self.backoff, self.gone = obj, FIRST_BACKOFF, False
        action = self._observe(obj)
        return action if isinstance(action, Done) or self._expired() else READ_ON

    def watch_ended(self) -> Action:
        """The server ended the watch at its timeout: continue from the cursor, no read needed."""
        return self._next()

    def watch_failed(self, error: ApiError) -> Action:
        if isinstance(error, Gone):
            again, self.gone = self.gone, True
            return Relist(self._back_off() if again else 0.0)  # a second 410 in a row: do not hammer
        if error.cannot_watch:
            self.settings.can_watch = False  # this server cannot watch the resource: poll
        elif not isinstance(error, Transient):
            raise error
        return Relist(self._back_off())

    # -- the rules ------------------------------------------------------------------------------------
    def _observe(self, obj: dict[str, Any]) -> Action:
        if self.on_change is not None:
            self.on_change(obj)
        return Done(obj) if self.until(obj) else self._next()

    def _next(self) -> Action:
        remaining = None if self.deadline is None else self.deadline - self.clock()
        if remaining is not None and remaining <= 0:
            raise self._timeout()
        window = self.settings.watch_timeout if remaining is None else min(self.settings.watch_timeout, remaining)
        if not self.settings.can_watch:
            return Relist(min(self.settings.poll_interval, window))
        return Watch(self.cursor.resource_version, window)

    def _expired(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline

    def _back_off(self) -> float:
        delay, self.backoff = self.backoff, min(self.backoff * 2, self.settings.poll_interval)
        return delay

    def timed_out(self) -> WaitTimeout:
        """The error for a wait whose deadline passed (with the last version of the object seen)."""
        return self._timeout()

    def _timeout(self) -> WaitTimeout:
        return WaitTimeout(self.kind, self.namespace, self.name, float(self.timeout or 0), self.obj)


def watch_once(waiter: Waiter, watch: Watch) -> Steps[Action]:
    """One watch request, its events fed to ``waiter``; returns the waiter's next action."""
    res = resource_for(waiter.kind)
    try:
        line = yield from op.watch(res, waiter.name, waiter.namespace, watch.resource_version, watch.seconds)
        while line is not None:
            event = parse_event(line, waiter.cursor)
            action = READ_ON if event is None else waiter.event(*event)
            if action is not READ_ON:
                return action
            line = yield READ_ON
    except ApiError as error:
        return waiter.watch_failed(error)
    return waiter.watch_ended()


def wait(waiter: Waiter, timeout: op.Timeout) -> Steps[dict[str, Any]]:
    """The loop: list, watch, sleep as ``waiter`` says, until it is done (or raises)."""
    action: Action = Relist()
    while not isinstance(action, Done):
        if isinstance(action, Watch):
            action = yield from watch_once(waiter, action)
            continue
        if isinstance(action, Relist) and action.after > 0:
            yield Sleep(action.after)
        try:
            obj, version = yield from op.current(waiter.kind, waiter.name, waiter.namespace, waiter.uid, timeout)
        except ApiError as error:
            if waiter.obj is None:  # the first read: nothing to wait for yet
                raise
            action = waiter.list_failed(error)
            continue
        action = waiter.listed(obj, version)
    return action.obj
