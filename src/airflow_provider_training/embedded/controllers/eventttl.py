"""Events expire, as kube-apiserver's ``--event-ttl`` makes them (default one hour): an Event is
removed once its last write (``lastTimestamp``, ``eventTime``, ``series.lastObservedTime``, else its
creation) is older than the time to live. Without it a long-lived data directory kept every Event of
every job (two dozen per 4-replica job), and the store and ``kubectl get events`` grew for good.

``AIRFLOW_TRAINING_EVENT_TTL``: seconds (default 3600); ``0`` keeps Events. The sweep runs every
tenth of the time to live, at most every minute, and deletes in transactions of ``BATCH`` Events,
yielding to the API server between pages, so a first sweep over a large old store does not stall it.
Watchers see each removal as a DELETED event, as on a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from datetime import UTC, datetime, timedelta

from airflow_provider_training.embedded.runtime import ControllerContext
from airflow_provider_training.frameworks.timeutil import parse_time
from airflow_provider_training.specs.resources import EVENTS
from airflow_provider_training.specs.unstructured import Unstructured

log = logging.getLogger(__name__)

TTL_ENV = "AIRFLOW_TRAINING_EVENT_TTL"
DEFAULT_TTL = 3600.0
BATCH = 500


def ttl_from_env() -> float:
    """The Events' time to live in seconds (0: they are kept)."""
    text = os.environ.get(TTL_ENV, "")
    if not text:
        return DEFAULT_TTL
    try:
        ttl = float(text)
    except ValueError:
        ttl = -1.0
    if ttl < 0:
        log.warning("%s=%r is not a number of seconds >= 0; Events expire after %ss", TTL_ENV, text, DEFAULT_TTL)
        return DEFAULT_TTL
    return ttl


def last_written(event: Unstructured) -> datetime | None:
    """When the Event was last written, as far as its fields tell."""
    times = []
    for text in (
        event.get("lastTimestamp"),
        event.get("eventTime"),
        (event.get("series") or {}).get("lastObservedTime"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        if isinstance(text, str) and text:
            with contextlib.suppress(ValueError):
                times.append(parse_time(text))
    return max(times) if times else None


class EventTTL:
    """Removes expired Events (a runnable of the controller manager, not a reconciler: nothing to
    watch, a sweep on a timer)."""

    name = "event-ttl"

    def __init__(self, ttl: float | None = None) -> None:
        self.ttl = ttl_from_env() if ttl is None else ttl

    async def run(self, ctx: ControllerContext) -> None:
        if self.ttl <= 0:
            return
        interval = min(60.0, max(0.5, self.ttl / 10))
        while not ctx.stopping.is_set():
            removed = await self.sweep(ctx)
            if removed:
                log.info("removed %d Events older than %ss", removed, self.ttl)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ctx.stopping.wait(), interval)

    async def sweep(self, ctx: ControllerContext, now: datetime | None = None) -> int:
        """Delete the Events past their time to live; how many went."""
        cutoff = (now or datetime.now(UTC)) - timedelta(seconds=self.ttl)
        removed, after = 0, None
        while True:
            page = ctx.store.list(EVENTS.key, after=after, limit=BATCH)
            expired = []
            for event in page.items:
                written = last_written(event)
                if written is not None and written < cutoff:
                    meta = event["metadata"]
                    expired.append((meta.get("namespace", ""), meta["name"]))
            if expired:
                removed += ctx.store.delete_many(EVENTS.key, expired)
            if len(page.items) < BATCH:
                return removed
            last = page.items[-1]["metadata"]
            after = (last.get("namespace", ""), last["name"])
            await asyncio.sleep(0)  # the API server's turn between pages
