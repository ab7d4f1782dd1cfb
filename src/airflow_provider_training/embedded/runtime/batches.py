"""Creating and deleting many objects in one pass without holding the event loop: Kubernetes'
``controller.SlowStartBatch`` and the Job controller's per-sync cap, shared by every controller
(and the node agent) that writes a pod, Job or other child per item.

Upstream calls ``fn`` in batches of 1, 2, 4, 8, ... (``SlowStartInitialBatchSize`` = 1), each batch
only once the one before succeeded, so a burst that fails (a quota, a webhook) fails after one
call, not after hundreds; and the Job controller creates or deletes at most 500 pods per sync
(``MaxPodCreateDeletePerSync``; ReplicaSets' ``BurstReplicas`` is 500 too), the rest in the next.
Here the batches also bound how long the loop is held: between batches the loop serves every
other client and controller, and a batch that took longer than ``BATCH_BUDGET`` halves the next.
A 1,000-pod job's pods were created, deleted and reported in one pass of 1-2 s before.

The batches of every controller (and the node agent) also share one budget of the loop's time,
``SHARE`` of each ``WINDOW``: a client's request takes a few rounds of the loop, and with five
controllers each running a batch in every round, each round took 30-50 ms and a request waited
100-300 ms. Past the budget, the next batch waits for the next window.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from airflow_provider_training.embedded import jsoncodec
from airflow_provider_training.embedded.store import Store

T = TypeVar("T")
R = TypeVar("R")

SLOW_START_INITIAL_BATCH = 1  # controller.SlowStartInitialBatchSize
MAX_PER_PASS = 500  # the Job controller's MaxPodCreateDeletePerSync
# A pod write (its commit, its events to the informers) takes ~1 ms here, a few on a busy machine;
# several controllers may each run a batch before the loop comes round again.
MAX_BATCH = 16
BATCH_BUDGET = 0.005  # seconds of loop time a batch should take; the next grows only below it
DECODES_PER_YIELD = 64  # objects decoded by ``list_in_slices`` before the loop serves others
WINDOW = 0.02  # seconds
SHARE = 0.008  # seconds of each window the batches may take together


class _Budget:
    """The batches' share of the loop in the current window (one event loop runs them all)."""

    def __init__(self) -> None:
        self.window = 0.0
        self.used = 0.0

    async def turn(self) -> None:
        """Return when a batch may run: at once while the window has budget left (the loop's other
        ready work goes first all the same), else at the start of the next window."""
        await asyncio.sleep(0)
        now = time.monotonic()
        if now - self.window >= WINDOW:
            self.window, self.used = now, 0.0
        elif self.used >= SHARE:
            await asyncio.sleep(self.window + WINDOW - now)
            self.window, self.used = time.monotonic(), 0.0

    def spent(self, seconds: float) -> None:
        self.used += seconds


BUDGET = _Budget()


async def slow_start_batch(
    items: Sequence[T],
    fn: Callable[[T], R],
    *,
    proceed: Callable[[], bool] | None = None,
    after_batch: Callable[[], None] | None = None,
    around: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
) -> list[R]:
    """``fn(item)`` for each item in order, in batches of 1, 2, 4, ... (at most ``MAX_BATCH``),
    yielding the event loop between batches; returns the results. An error ends it (raised, as
    upstream skips the remaining batches once one fails). ``proceed``: asked before each batch after
    the first, False stops (the owner went away while the loop served others: the next pass
    decides again). ``after_batch``: called after each batch (writing what the batch queued);
    ``around``: a context each batch runs in (nothing is held across the loop's other work)."""
    results: list[R] = []
    size, start = SLOW_START_INITIAL_BATCH, 0
    while start < len(items):
        # (the first batch too: the pass may have read its owner before an ``await``)
        if proceed is not None and not proceed():
            break
        began = time.monotonic()
        with around():
            for item in items[start : start + size]:
                results.append(fn(item))
            if after_batch is not None:
                after_batch()
        start += size
        took = time.monotonic() - began
        BUDGET.spent(took)
        size = min(size * 2, MAX_BATCH) if took < BATCH_BUDGET else max(1, size // 2)
        if start < len(items):
            await BUDGET.turn()  # the loop's other work (requests, other controllers) goes first
    return results


async def list_in_slices(
    store: Store, resource: str, namespace: str | None = None, *, label_equals: Iterable[tuple[str, str]] = ()
) -> list[dict[str, Any]]:
    """``store.list(...).items``, decoded a slice at a time with the loop served between: a pass
    over a 1,000-pod job read (and decoded) its pods in one go, tens of milliseconds, each pass."""
    raw = store.list_raw(resource, namespace, label_equals=label_equals)
    items: list[dict[str, Any]] = []
    for i, text in enumerate(raw.items):
        if i and i % DECODES_PER_YIELD == 0:
            await asyncio.sleep(0)
        items.append(jsoncodec.decode(text))
    return items


def per_pass(items: Sequence[T]) -> tuple[Sequence[T], bool]:
    """The first ``MAX_PER_PASS`` of ``items``, and whether some were left for the next pass."""
    return items[:MAX_PER_PASS], len(items) > MAX_PER_PASS
