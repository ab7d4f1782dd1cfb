"""The controller runtime over a real store (no daemon, no processes): what reaches ``reconcile``.

A recording controller owns pods by ownerReference and by label; the tests write to the store as
the API server and the node agent would and check which keys get reconciled, how often and when.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.runtime import ControllerContext, For, Owns, OwnWrites, WorkQueue, run
from airflow_provider_training.embedded.runtime.controller import Key
from airflow_provider_training.embedded.store import ConflictError, Store
from airflow_provider_training.specs.refs import ObjectRef

JOBS, PODS = "batch/jobs", "core/pods"


def pod(name: str, owner: str, *, label: bool = False, phase: str = "Pending") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if label:
        meta["labels"] = {"owner-name": owner}
    else:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": "x", "controller": True}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "status": {"phase": phase}}


class Recorder:
    name = "recorder"
    sources = (
        For(JOBS),
        Owns(PODS, owner=JOBS, kind="Job", api_version="batch/v1"),
        Owns(PODS, owner=JOBS, label="owner-name"),
    )

    def __init__(self, answer: Callable[[Key, int], float | None] = lambda key, n: None) -> None:
        self.passes: list[Key] = []
        self.answer = answer

    def reconcile(self, key: Key) -> float | None:
        self.passes.append(key)
        return self.answer(key, self.passes.count(key))


async def running(
    store: Store, tmp_path: Path, controller: Recorder, body: Callable[[], Any], own_writes: OwnWrites | None = None
) -> None:
    ctx = ControllerContext(store, Home(tmp_path))
    task = asyncio.create_task(run(controller, ctx, WorkQueue(base_delay=0.01), own_writes=own_writes))
    try:
        await asyncio.sleep(0.05)
        await body()
    finally:
        ctx.stopping.set()
        task.cancel()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store.db")


def test_a_burst_of_pod_writes_is_one_pass_for_their_owner(store: Store, tmp_path: Path) -> None:
    controller = Recorder()
    store.create(JOBS, {"kind": "Job", "metadata": {"name": "a", "namespace": "ns"}})

    async def burst() -> None:
        for i in range(20):
            store.create(PODS, pod(f"a-{i}", "a"))
        await asyncio.sleep(0.1)

    asyncio.run(running(store, tmp_path, controller, burst))
    # one pass at start-up (the job was listed), one for the burst
    assert controller.passes == [ObjectRef("Job", "ns", "a")] * 2


def test_owned_objects_map_to_their_owner_by_reference_or_label(store: Store, tmp_path: Path) -> None:
    controller = Recorder()

    async def writes() -> None:
        store.create(PODS, pod("p1", "by-ref"))
        await asyncio.sleep(0.05)
        store.create(PODS, pod("p2", "by-label", label=True))
        await asyncio.sleep(0.05)
        store.create(PODS, {"metadata": {"name": "orphan", "namespace": "ns"}})
        await asyncio.sleep(0.05)

    asyncio.run(running(store, tmp_path, controller, writes))
    assert controller.passes == [ObjectRef("Job", "ns", "by-ref"), ObjectRef("Job", "ns", "by-label")]


def test_conflicts_requeue_at_once_errors_back_off_and_a_returned_delay_comes_back(
    store: Store, tmp_path: Path
) -> None:
    def answer(key: Key, n: int) -> float | None:
        if key.name == "conflict" and n == 1:
            raise ConflictError("changed under the pass")
        if key.name == "broken" and n <= 3:
            raise RuntimeError("boom")
        if key.name == "later" and n == 1:
            return 0.1
        return None

    controller = Recorder(answer)
    for name in ("conflict", "broken", "later"):
        store.create(JOBS, {"kind": "Job", "metadata": {"name": name, "namespace": "ns"}})

    async def wait() -> None:
        await asyncio.sleep(0.5)

    asyncio.run(running(store, tmp_path, controller, wait))
    names = [key.name for key in controller.passes]
    assert names.count("conflict") == 2
    assert names.count("broken") == 4  # three failures (0.01, 0.02, 0.04 s back-off), then success
    assert names.count("later") == 2


class StatusWriter(Recorder):
    """Writes its job's status (and creates a pod) on every pass, noting its own writes as the job
    controller and the node agent do."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store
        self.own = OwnWrites()

    def reconcile(self, key: Key) -> float | None:
        self.passes.append(key)
        job = self.store.get(JOBS, key.namespace, key.name)
        assert job is not None
        job["status"] = {"passes": len(self.passes)}
        self.own.add(self.store.update(JOBS, job, check_rv=False))
        created = self.store.create_missing([(PODS, pod(f"{key.name}-{len(self.passes)}", key.name))])
        self.own.add(created[0] or {})
        return None


def test_a_controllers_own_writes_start_no_pass_but_anyone_elses_do(store: Store, tmp_path: Path) -> None:
    controller = StatusWriter(store)

    async def body() -> None:
        store.create(JOBS, {"kind": "Job", "metadata": {"name": "a", "namespace": "ns"}})
        await asyncio.sleep(0.2)
        assert len(controller.passes) == 1  # its status write and its pod came back as events: no pass
        job = store.get(JOBS, "ns", "a")
        assert job is not None
        job["status"] = {"edited": "by a user"}
        store.update(JOBS, job)  # a status edit by someone else
        await asyncio.sleep(0.2)
        assert len(controller.passes) == 2
        store.update(PODS, {**pod("a-1", "a"), "status": {"phase": "Running"}}, check_rv=False)  # the node's
        await asyncio.sleep(0.2)

    asyncio.run(running(store, tmp_path, controller, body, own_writes=controller.own))
    assert controller.passes == [ObjectRef("Job", "ns", "a")] * 3


def test_slow_start_batches_grow_stop_and_let_the_loop_in_between() -> None:
    """controller.SlowStartBatch as the controllers use it (issue 25 item 1): batches of 1, 2, 4, ...
    up to a cap, the event loop serving others between them (a 1,000-pod job's pods were written
    in one go, holding every client); a failure ends it; ``proceed`` stops it between batches."""
    from airflow_provider_training.embedded.runtime import batches

    async def scenario() -> None:
        calls: list[tuple[str, int]] = []
        ticking = True

        async def other() -> None:  # a client's request, another controller
            while ticking:
                calls.append(("other", -1))
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        await asyncio.sleep(0)
        done = await batches.slow_start_batch(list(range(40)), lambda i: calls.append(("item", i)) or i)
        ticking = False
        await task
        assert done == list(range(40))
        runs, run = [], 0
        for what, _ in calls[1:]:
            if what == "item":
                run += 1
            elif run:
                runs.append(run)
                run = 0
        assert runs[:4] == [1, 2, 4, 8] and max(runs) <= batches.MAX_BATCH and sum(runs) + run == 40

        seen: list[int] = []
        stop_after = 3
        assert await batches.slow_start_batch(list(range(40)), seen.append, proceed=lambda: len(seen) < stop_after)
        assert seen == [0, 1, 2]  # batches 1 and 2, then proceed said no

        def fail(i: int) -> int:
            if i == 4:
                raise RuntimeError("quota")
            return i

        with pytest.raises(RuntimeError):
            await batches.slow_start_batch(list(range(40)), fail)
        assert batches.per_pass(list(range(1200))) == (list(range(batches.MAX_PER_PASS)), True)

    asyncio.run(scenario())
