"""Events expire after their time to live (kube-apiserver's --event-ttl), in pages, watchers told."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.embedded.controllers import eventttl
from airflow_provider_training.embedded.controllers.eventttl import EventTTL
from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.runtime import ControllerContext
from airflow_provider_training.embedded.store import Store, WatchEvent

# The sweep's "now", two hours ahead: an Event stored now was last written two hours before it
# (the time to live runs from the last write: creation, or a newer lastTimestamp / series / eventTime).
NOW = datetime.now(UTC) + timedelta(hours=2)


def _event(name: str, age: timedelta | None, **fields: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "ns"}}
    if age is not None:
        event["lastTimestamp"] = (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ")
    event.update(fields)
    return event


def _context(tmp_path: Path) -> ControllerContext:
    return ControllerContext(store=Store(tmp_path / "s.db"), home=Home(tmp_path / "home"))


def test_events_past_their_time_to_live_go_in_pages_and_watchers_see_them_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(eventttl, "BATCH", 3)  # several pages
    ctx = _context(tmp_path)
    old = [_event(f"old-{i}", timedelta(hours=3)) for i in range(7)]
    recent = [
        _event("recent", timedelta(minutes=5)),
        _event(
            "repeated",
            timedelta(hours=3),
            series={"lastObservedTime": (NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
        ),
        _event("new-style", None, eventTime=(NOW - timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")),
    ]
    ctx.store.create_many("core/events", old + recent)
    seen: list[WatchEvent] = []
    ctx.store.subscribe(seen.append)

    removed = asyncio.run(EventTTL(ttl=3600).sweep(ctx, now=NOW))

    assert removed == 7
    left = sorted(e["metadata"]["name"] for e in ctx.store.list("core/events").items)
    assert left == ["new-style", "recent", "repeated"]
    assert sorted(e.name for e in seen if e.type == "DELETED") == sorted(f"old-{i}" for i in range(7))


def test_an_event_without_a_time_is_judged_by_its_creation(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    ctx.store.create("core/events", _event("untimed", None))  # creationTimestamp: now
    sweeper = EventTTL(ttl=60)
    assert asyncio.run(sweeper.sweep(ctx)) == 0
    assert asyncio.run(sweeper.sweep(ctx, now=datetime.now(UTC) + timedelta(minutes=2))) == 1


def test_a_time_to_live_of_zero_keeps_events_and_a_bad_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = _context(tmp_path)
    ctx.store.create("core/events", _event("ancient", timedelta(days=30)))
    monkeypatch.setenv(eventttl.TTL_ENV, "0")
    asyncio.run(asyncio.wait_for(EventTTL().run(ctx), 5))  # returns at once: nothing to do
    assert len(ctx.store.list("core/events").items) == 1
    monkeypatch.setenv(eventttl.TTL_ENV, "an hour")
    with caplog.at_level(logging.WARNING):
        assert EventTTL().ttl == eventttl.DEFAULT_TTL
    assert eventttl.TTL_ENV in caplog.text and "an hour" in caplog.text
