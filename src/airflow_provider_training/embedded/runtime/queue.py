"""A de-duplicating work queue with delayed re-adds and per-key back-off, like client-go's workqueue.

A key waiting in the queue is not added twice; ``add_after`` keeps one pending timer per key (the
earliest wins); ``retry`` re-adds a failing key after a delay that doubles per consecutive failure
(``forget_failures`` resets it once the key reconciles).
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

K = TypeVar("K")


class WorkQueue(Generic[K]):
    def __init__(self, base_delay: float = 0.05, max_delay: float = 10.0) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._failures: dict[K, int] = {}
        self.base_delay, self.max_delay = base_delay, max_delay

    def add(self, key: K) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` in ``delay`` seconds, unless an earlier re-add is already pending."""
        loop = asyncio.get_running_loop()
        at = loop.time() + max(delay, 0.0)
        pending = self._timers.get(key)
        if pending is not None and pending[0] <= at:
            return
        if pending is not None:
            pending[1].cancel()
        self._timers[key] = (at, loop.call_at(at, self._fire, key))

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def retry(self, key: K) -> float:
        """Re-add a key whose reconcile failed, after its back-off; returns the delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(self.base_delay * 2**failures, self.max_delay)
        self.add_after(key, delay)
        return delay

    def forget_failures(self, key: K) -> None:
        self._failures.pop(key, None)

    def forget(self, key: K) -> None:
        """Drop the key's pending timer and failure count (its object was deleted)."""
        pending = self._timers.pop(key, None)
        if pending is not None:
            pending[1].cancel()
        self._failures.pop(key, None)

    def __len__(self) -> int:
        return self._queue.qsize()

    async def get(self) -> K:
        key = await self._queue.get()
        self._queued.discard(key)
        return key
