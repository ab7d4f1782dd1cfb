"""Shared watches: one informer per (cluster, namespace, kind) per event loop, reference-counted.

Many waiters in one process — a triggerer's deferred tasks, the cockpit's open tabs in the API
server — would otherwise each hold a watch: a thousand deferred tasks, a thousand watch connections
to the cluster's API server. An :class:`Informer` follows every object of one kind in one namespace
(``following.Follower``: list, watch from the list's resourceVersion with bookmarks, resume after a
dropped connection, relist after 410, poll where the server cannot watch) and hands each change to
the subscribers of that object by name, and to those of all objects. It starts with its first
subscriber and stops once the last one has left and ``linger`` seconds passed without a new one
(tasks that fire and defer again in a burst keep it).

The caller names the cluster (``identity``, e.g. a digest of the connection: the hooks make it) and
says how to reach it (``connect``: an async context manager giving an ``AsyncTrainingJobClient``).
The informer opens its own client with the first subscriber's ``connect`` and closes it when it
stops, so no subscriber's lifetime holds the watch; its settings (``watch_timeout``,
``poll_interval``, ``backoff``) are that client's. An answer that retrying will not change (403, a
first list that fails, a connection that cannot be made) ends the informer: every subscriber gets
the error, and the next subscriber starts a new one.

:data:`SHARED` is the process's registry. Informers live on the event loop that started them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Hashable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from airflow_provider_training.client.aio import AsyncTrainingJobClient
from airflow_provider_training.client.errors import JobDeleted
from airflow_provider_training.client.following import Follower
from airflow_provider_training.client.resources import followable
from airflow_provider_training.client.state import finished
from airflow_provider_training.client.waiting import Done, Predicate, Waiter

log = logging.getLogger(__name__)

Connect = Callable[[], AbstractAsyncContextManager[AsyncTrainingJobClient]]
Deliver = Callable[[str, dict[str, Any]], None]
Key = tuple[Hashable, str, str]  # (cluster identity, namespace, kind)
#: The event type a subscriber gets when its informer ended with an error (``Subscription.error``).
ERROR = "ERROR"
DEFAULT_LINGER = 5.0


class InformerStopped(RuntimeError):
    """The informer ended without an error of the server's (its loop is closing)."""


class Subscription:
    """One subscriber's view of an informer: the changes of object ``name`` (None: of every object)
    go to ``deliver`` or, without one, to :meth:`get`. A subscriber that joins a running informer
    first gets its current objects as ``ADDED``."""

    def __init__(self, informer: Informer, name: str | None, deliver: Deliver | None) -> None:
        self.informer, self.name = informer, name
        self._queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self.deliver: Deliver = deliver or (lambda type_, obj: self._queue.put_nowait((type_, obj)))

    @property
    def objects(self) -> Mapping[str, dict[str, Any]]:
        """Every object the informer holds now, by name."""
        return self.informer.objects

    @property
    def error(self) -> BaseException | None:
        return self.informer.error

    def current(self) -> dict[str, Any] | None:
        return self.informer.objects.get(self.name or "")

    async def synced(self) -> None:
        """Return once the informer has listed; raise its error if it ended instead."""
        await self.informer.synced.wait()
        self.check()

    def check(self) -> None:
        if self.informer.error is not None:
            raise self.informer.error

    async def get(self) -> tuple[str, dict[str, Any]]:
        """The next change (``type``, object); raises the informer's error once it ended."""
        type_, obj = await self._queue.get()
        if type_ == ERROR:
            self.check()
        return type_, obj

    async def read(self) -> dict[str, Any] | None:
        """Object ``name`` read from the server now (one GET), for one the informer has not seen."""
        client = self.informer.client
        if client is None or self.name is None:
            self.check()
            raise InformerStopped(f"the informer of {self.informer.kind} in {self.informer.namespace} stopped")
        return await client.find(self.informer.kind, self.name, self.informer.namespace)


class Informer:
    """One shared follow of ``kind`` in ``namespace`` on one cluster, and its subscribers."""

    def __init__(self, key: Key, connect: Connect, linger: float, forget: Callable[[Informer], None]) -> None:
        self.key = key
        _, self.namespace, self.kind = key
        self.connect, self.linger, self._forget = connect, linger, forget
        self.objects: dict[str, dict[str, Any]] = {}
        self.by_name: dict[str, set[Subscription]] = {}
        self.everything: set[Subscription] = set()
        self.client: AsyncTrainingJobClient | None = None
        self.error: BaseException | None = None
        self.synced = asyncio.Event()
        self._idle: asyncio.TimerHandle | None = None
        # A context of its own: not the first subscriber's (a triggerer routes a trigger's log lines
        # by context variables; the shared watch belongs to no one trigger).
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"informer {self.kind} {self.namespace}", context=contextvars.Context()
        )

    @property
    def subscribers(self) -> int:
        return len(self.everything) + sum(len(subs) for subs in self.by_name.values())

    # -- the follow -----------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            async with self.connect() as client:
                self.client = client
                follower = Follower(
                    self.kind, self.namespace, client, on_event=self._changed, on_synced=self.synced.set
                )
                self.objects = follower.objects  # the follower keeps them; subscribers read them
                await client.follow(follower)
            raise InformerStopped(f"the follow of {self.kind} in {self.namespace} ended")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every subscriber must hear it, whatever it is, rather than wait forever
            self._fail(exc)
        finally:
            self.client = None
            self._forget(self)

    def _changed(self, type_: str, obj: dict[str, Any]) -> None:
        name = str(obj["metadata"].get("name"))
        for subscription in (*self.by_name.get(name, ()), *self.everything):
            self._hand(subscription, type_, obj)

    @staticmethod
    def _hand(subscription: Subscription, type_: str, obj: dict[str, Any]) -> None:
        try:
            subscription.deliver(type_, obj)
        except Exception:  # one subscriber's bug must not stop the others' watch
            log.exception("a subscriber of %s failed on a %s event", subscription.informer.kind, type_)

    def _fail(self, error: BaseException) -> None:
        log.info("the shared watch of %s in %s ended: %s", self.kind, self.namespace, error)
        self.error = error
        self.synced.set()
        for subscription in (*self.everything, *(s for subs in self.by_name.values() for s in subs)):
            self._hand(subscription, ERROR, {})

    # -- subscribers ------------------------------------------------------------------------------------
    def add(self, name: str | None, deliver: Deliver | None) -> Subscription:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        subscription = Subscription(self, name, deliver)
        if name is None:
            self.everything.add(subscription)
        else:
            self.by_name.setdefault(name, set()).add(subscription)
        if self.error is not None:
            self._hand(subscription, ERROR, {})
        elif self.synced.is_set():  # what a subscriber of the first list got as ADDED
            current = list(self.objects.values()) if name is None else [self.objects[name]] * (name in self.objects)
            for obj in current:
                self._hand(subscription, "ADDED", obj)
        return subscription

    def remove(self, subscription: Subscription) -> None:
        if subscription.name is None:
            self.everything.discard(subscription)
        else:
            subs = self.by_name.get(subscription.name, set())
            subs.discard(subscription)
            if not subs:
                self.by_name.pop(subscription.name, None)
        if self.subscribers == 0 and self._idle is None:
            if self.linger > 0:
                self._idle = asyncio.get_running_loop().call_later(self.linger, self.stop)
            else:
                self.stop()

    def stop(self) -> None:
        """Leave the registry at once (a new subscriber starts a new informer) and close the watch."""
        self._idle = None
        self._forget(self)
        self._task.cancel()


class Informers:
    """The informers of a process, one per (cluster identity, namespace, kind) and event loop.

    ``linger``: seconds an informer without subscribers keeps its watch before it stops."""

    def __init__(self, *, linger: float = DEFAULT_LINGER) -> None:
        self.linger = linger
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Key, Informer]] = (
            weakref.WeakKeyDictionary()
        )

    def running(self) -> dict[Key, Informer]:
        """The informers of the running event loop (for tests and benchmarks)."""
        return self._by_loop.setdefault(asyncio.get_running_loop(), {})

    @contextlib.asynccontextmanager
    async def subscribe(
        self,
        identity: Hashable,
        connect: Connect,
        kind: str,
        namespace: str,
        *,
        name: str | None = None,
        deliver: Deliver | None = None,
    ) -> AsyncIterator[Subscription]:
        """Subscribe to the changes of ``kind`` object ``name`` (None: every object) in ``namespace``
        on the cluster ``identity``; leaving the block unsubscribes."""
        followable(kind)  # an unknown kind fails here, in the caller, not in a shared task
        informers = self.running()
        key: Key = (identity, namespace, kind)
        informer = informers.get(key)
        if informer is None:

            def forget(gone: Informer) -> None:
                if informers.get(key) is gone:
                    del informers[key]

            informer = informers[key] = Informer(key, connect, self.linger, forget)
        subscription = informer.add(name, deliver)
        try:
            yield subscription
        finally:
            informer.remove(subscription)

    async def wait(
        self,
        identity: Hashable,
        connect: Connect,
        kind: str,
        name: str,
        namespace: str,
        *,
        uid: str | None = None,
        timeout: float | None = None,
        until: Predicate = finished,
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """:meth:`AsyncTrainingJobClient.wait` through the shared watch: the same rules (``Waiter``)
        and errors (:class:`WaitTimeout` with the last version seen, :class:`JobDeleted`), no watch
        of its own. An object the informer has not seen (created a moment ago) is read once.
        ``on_change`` sees each version of the object (a TrainJob's progress reports)."""
        waiter = Waiter(kind, name, namespace, _Unused(), uid=uid, timeout=timeout, until=until, on_change=on_change)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout

        async def within(awaitable: Any) -> Any:
            remaining = None if deadline is None else deadline - loop.time()
            try:
                return await asyncio.wait_for(awaitable, remaining)
            except asyncio.TimeoutError:
                raise waiter.timed_out() from None

        async with self.subscribe(identity, connect, kind, namespace, name=name) as subscription:
            await within(subscription.synced())
            obj = subscription.current()
            caught_up = obj is not None and (not uid or _uid(obj) == uid)
            if not caught_up:  # not seen yet, or a namesake the shared watch has not seen go: ask
                obj = await within(subscription.read())
            if obj is None:
                raise JobDeleted(kind, namespace, name)
            if uid and _uid(obj) != uid:
                raise JobDeleted(kind, namespace, name, "was replaced by another object of the same name")
            mine = _uid(obj)
            action = waiter.listed(obj, "")
            while not isinstance(action, Done):
                type_, changed = await within(subscription.get())
                if _uid(changed) == mine:
                    caught_up = True
                elif not caught_up:
                    continue  # the older namesake's last events, before the watch reaches this object
                action = waiter.event(type_, changed)
            return action.obj


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


class _Unused:
    """The Waiter's settings, which only its own watch loop reads."""

    watch_timeout = 3600.0
    poll_interval = 3600.0
    can_watch = True


SHARED = Informers()
"""The process's informers: a triggerer's deferred tasks and the cockpit's tabs subscribe here."""
