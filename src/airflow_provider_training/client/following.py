"""Following every object of a kind in a namespace: the list → watch → resume → 410 → relist rules of
a reflector (client-go's, kopf's), written once for both clients.

As ``waiting.py`` keeps its parts apart, so does this:

- :class:`Follower` — the rules, a pure state machine that also holds what it has seen
  (``objects``, by name). Fed *listed / event / watch ended / watch failed / list failed*, it hands
  each change to ``on_event`` and answers what to do next (:class:`Relist`, :class:`Watch`).
- :func:`follow` — the loop of requests (``steps.py``) both clients drive: the sync one in a
  thread until its :class:`~client.sync.Stop` is set, the async one until its task is cancelled.

The rules: list (a first list that fails fails the follow: nothing to follow yet), then watch from
the list's resourceVersion with bookmarks (which move the cursor), one watch request per
``watch_timeout`` seconds while nothing changes. A dropped connection or a server error resumes
the watch from the cursor after a back-off (``backoff`` seconds, doubling up to ``poll_interval``;
reset by the next event). ``410 Gone`` lists again at once (a second 410 in a row backs off), and
the new list is compared with what was seen: what vanished meanwhile is handed on as ``DELETED``,
what changed as ``MODIFIED`` (a name now held by another object: ``DELETED`` then ``ADDED``), what
is new as ``ADDED`` — so no change is lost, only the versions in between. A server that cannot
watch the resource (400/404/405/501 to a watch) is listed every ``poll_interval`` from then on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from airflow_provider_training.client import operations as op
from airflow_provider_training.client.errors import ApiError, Gone, Transient
from airflow_provider_training.client.resources import followable
from airflow_provider_training.client.steps import READ_ON, Sleep, Steps
from airflow_provider_training.client.waiting import Relist, Watch
from airflow_provider_training.client.watching import Cursor, parse_event

OnEvent = Callable[[str, dict[str, Any]], None]
Action = Relist | Watch


class Settings(Protocol):
    """What a follow reads from its client (``can_watch`` is remembered across follows and waits)."""

    watch_timeout: float
    poll_interval: float
    backoff: float
    can_watch: bool


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


class Follower:
    """The rules of following ``kind`` objects in ``namespace`` (optionally selected); each change
    goes to ``on_event(type, object)`` with type ``ADDED`` / ``MODIFIED`` / ``DELETED``;
    ``on_synced()`` is called once, after the first list's objects were handed on."""

    def __init__(
        self,
        kind: str,
        namespace: str,
        settings: Settings,
        *,
        on_event: OnEvent,
        on_synced: Callable[[], None] | None = None,
        label_selector: str = "",
        field_selector: str = "",
        stopped: Callable[[], bool] = lambda: False,
    ) -> None:
        self.resource = followable(kind)
        self.kind, self.namespace, self.settings = kind, namespace, settings
        self.label_selector, self.field_selector = label_selector, field_selector
        self.on_event, self.on_synced, self.stopped = on_event, on_synced, stopped
        self.objects: dict[str, dict[str, Any]] = {}
        self.cursor = Cursor("")
        self.synced = False
        self.backoff = settings.backoff
        self.gone = False  # the last watch ended with 410

    # -- what happened ------------------------------------------------------------------------------
    def listed(self, items: list[dict[str, Any]], resource_version: str) -> Action:
        """A LIST answered: hand on the differences from what was seen (all of it, the first time)."""
        fresh = {_name(obj): obj for obj in items}
        for name, old in list(self.objects.items()):
            new = fresh.get(name)
            if new is None or _uid(new) != _uid(old):
                del self.objects[name]
                self.on_event("DELETED", old)
        for name, obj in fresh.items():
            seen = self.objects.get(name)
            if seen is None or _version(seen) != _version(obj):
                self.objects[name] = obj
                self.on_event("ADDED" if seen is None else "MODIFIED", obj)
        self.cursor.resource_version = resource_version
        if not self.synced:
            self.synced = True
            if self.on_synced is not None:
                self.on_synced()
        return self._next()

    def list_failed(self, error: ApiError) -> Action:
        if not self.synced or not isinstance(error, Transient):
            raise error  # nothing to follow yet, or an answer that retrying will not change (403 …)
        return Relist(self._back_off())

    def event(self, type_: str, obj: dict[str, Any]) -> None:
        name = _name(obj)
        if type_ == "DELETED":
            self.objects.pop(name, None)
        else:
            old = self.objects.get(name)
            if old is not None and _version(old) == _version(obj) and _uid(old) == _uid(obj):
                return  # a version already handed on (resent after a resume)
            self.objects[name] = obj
        self.backoff, self.gone = self.settings.backoff, False
        self.on_event(type_, obj)

    def watch_ended(self) -> Action:
        """The server ended the watch at its timeout: continue from the cursor."""
        self.backoff = self.settings.backoff
        return self._next()

    def watch_failed(self, error: ApiError) -> Action:
        if isinstance(error, Gone):
            again, self.gone = self.gone, True
            return Relist(self._back_off() if again else 0.0)
        if error.cannot_watch:
            self.settings.can_watch = False  # this server cannot watch the resource: poll
            return Relist(0.0)
        if isinstance(error, Transient):  # a dropped connection, a server error: resume where it was
            return Watch(self.cursor.resource_version, self.settings.watch_timeout, after=self._back_off())
        raise error

    # -- the rules ------------------------------------------------------------------------------------
    def _next(self) -> Action:
        if not self.settings.can_watch:
            return Relist(self.settings.poll_interval)
        return Watch(self.cursor.resource_version, self.settings.watch_timeout)

    def _back_off(self) -> float:
        delay = self.backoff
        self.backoff = min(self.backoff * 2, max(self.settings.poll_interval, self.settings.backoff))
        return delay


def _watch(follower: Follower, watch: Watch) -> Steps[Action]:
    """One watch request, its events fed to ``follower``; returns what to do next."""
    try:
        line = yield from op.watch_all(
            follower.resource,
            follower.namespace,
            watch.resource_version,
            watch.seconds,
            label_selector=follower.label_selector,
            field_selector=follower.field_selector,
        )
        while line is not None:
            try:
                event = parse_event(line, follower.cursor)
            except ValueError as exc:  # not JSON: a broken stream, read again from the cursor
                raise Transient(0, f"undecodable watch line: {exc}") from None
            if event is not None:
                follower.event(*event)
            if follower.stopped():
                return watch
            line = yield READ_ON
    except ApiError as error:
        return follower.watch_failed(error)
    return follower.watch_ended()


def follow(follower: Follower, timeout: op.Timeout) -> Steps[None]:
    """The loop: list, watch, resume, sleep as ``follower`` says, until it is stopped (or raises)."""
    action: Action = Relist()
    while not follower.stopped():
        if action.after > 0:
            yield Sleep(action.after)
            if follower.stopped():
                return
        if isinstance(action, Watch):
            action = yield from _watch(follower, action)
            continue
        try:
            items, version = yield from op.list_all(
                follower.resource,
                follower.namespace,
                timeout,
                label_selector=follower.label_selector,
                field_selector=follower.field_selector,
            )
        except ApiError as error:
            action = follower.list_failed(error)
            continue
        action = follower.listed(items, version)
