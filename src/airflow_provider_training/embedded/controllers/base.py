"""The controller extension point: a protocol, the context a controller gets, and an informer.

Controllers read and write through the same ``Store`` as the API server (so every change they make
is a normal, watchable write with a new resourceVersion) and learn about changes through
``ControllerContext.informer``, which yields the current objects as ADDED and then every later
change, the way client-go informers do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.store import Store, WatchEvent

log = logging.getLogger(__name__)


K = TypeVar("K")


class WorkQueue(Generic[K]):
    """A de-duplicating work queue with delayed re-adds, like client-go's workqueue: a key waiting
    in the queue is not added twice, and ``add_after`` keeps one pending timer per key."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}

    def add(self, key: K) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        self.forget(key)
        self._timers[key] = asyncio.get_running_loop().call_later(max(delay, 0.0), self.add, key)

    def forget(self, key: K) -> None:
        """Drop the key's pending timer (its object was deleted)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    async def get(self) -> K:
        key = await self._queue.get()
        self._queued.discard(key)
        return key

    async def process(
        self,
        stopping: asyncio.Event,
        reconcile: Callable[[K], None],
        watchers: list[asyncio.Task[None]],
        retry: type[Exception] | tuple[type[Exception], ...] = (),
    ) -> None:
        """Reconcile keys until ``stopping``: a ``retry`` error (a write conflict) re-queues at once,
        any other error after a back-off (1 s doubling to 60 s) with one log line per new error, so
        one bad object neither floods the log nor holds up the other keys; the ``watchers`` that
        feed the queue are cancelled at the end."""
        failing: dict[K, tuple[str, float]] = {}
        try:
            while not stopping.is_set():
                key = await self.get()
                try:
                    reconcile(key)
                except retry:
                    self.add(key)
                except Exception as exc:
                    text, delay = f"{type(exc).__name__}: {exc}", 1.0
                    if key in failing:
                        previous, delay = failing[key]
                        delay = min(delay * 2, 60.0)
                        if previous != text:
                            log.warning("reconciling %s failed: %s", key, text)
                    else:
                        log.exception("reconciling %s failed", key)
                    failing[key] = (text, delay)
                    self.add_after(key, delay)
                else:
                    failing.pop(key, None)
        finally:
            for task in watchers:
                task.cancel()


@dataclass
class ControllerContext:
    store: Store
    home: Home
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    async def informer(self, resource: str) -> AsyncIterator[WatchEvent]:
        """Current objects of ``resource`` (a store key such as ``kubeflow.org/pytorchjobs``) as ADDED,
        then every committed change, until the daemon stops."""
        queue: asyncio.Queue[WatchEvent] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def listener(event: WatchEvent) -> None:
            if event.resource == resource:
                loop.call_soon_threadsafe(queue.put_nowait, event)

        unsubscribe = self.store.subscribe(listener)
        try:
            listed = self.store.list(resource)
            for obj in listed.items:
                meta = obj["metadata"]
                yield WatchEvent(
                    "ADDED",
                    resource,
                    meta.get("namespace", ""),
                    meta["name"],
                    int(meta["resourceVersion"]),
                    obj,
                )
            last = listed.resource_version
            while not self.stopping.is_set():
                event = await queue.get()
                if event.rv > last:
                    last = event.rv
                    yield event
        finally:
            unsubscribe()


class Controller(Protocol):
    name: str

    async def run(self, ctx: ControllerContext) -> None:
        """Reconcile until ``ctx.stopping`` is set; exceptions are logged and the controller restarted."""


ControllerFactory = Callable[[], Controller]
CONTROLLERS: list[ControllerFactory] = []


async def _supervise(controller: Controller, ctx: ControllerContext, restart_delay: float) -> None:
    while not ctx.stopping.is_set():
        try:
            await controller.run(ctx)
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("controller %s failed; restarting in %.1fs", controller.name, restart_delay)
            await asyncio.sleep(restart_delay)


def run_controllers(
    ctx: ControllerContext, factories: list[ControllerFactory] | None = None, restart_delay: float = 1.0
) -> list[asyncio.Task[None]]:
    return [
        asyncio.create_task(_supervise(factory(), ctx, restart_delay), name=f"controller:{i}")
        for i, factory in enumerate(CONTROLLERS if factories is None else factories)
    ]
