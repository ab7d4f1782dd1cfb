"""Deferred training tasks in one triggerer share one watch: N ``TrainingJobTrigger``s run as the
triggerer runs them (built from their stored kwargs, one event loop, cancelled the two ways Airflow
3.3+ cancels) hold one watch connection to the API server and make no requests at idle — counted on
the server (``/metrics``) — while each still fires its own event, and a user's kill of one
(``on_kill``; on 3.2 a plain cancel that keeps the job) leaves the others waiting."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from airflow_provider_training import compat
from airflow_provider_training.triggers import TrainingJobTrigger
from tests.apimetrics import open_watches, requests
from tests.factories import simple_job as job
from tests.operators.helpers import run_trigger, user_kill_message
from tests.waiting import wait_for_async

N = 30
IDLE_SECONDS = 5.0


def test_deferred_training_tasks_in_one_triggerer_share_one_watch(
    embedded_default: Any, job_driver: Any, test_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_training.client.informer import SHARED
    from airflow_provider_training.hooks.training import TrainingHook

    monkeypatch.setattr(SHARED, "linger", 0.5)
    kubeconfig = embedded_default.kubeconfig
    hook = TrainingHook()
    client = hook.get_client()
    names = [f"deferred-{i}" for i in range(N)]
    uids = {}
    for name in names:
        uids[name] = client.create(job(name=name), namespace=test_namespace)["metadata"]["uid"]
        job_driver.start("PyTorchJob", name, test_namespace)
    # as the triggerer builds them: from the kwargs the worker stored
    stored = {
        name: TrainingJobTrigger(
            "PyTorchJob", name, test_namespace, uids[name], **hook.trigger_connection(), on_kill_action="delete"
        ).serialize()[1]
        for name in names
    }
    baseline = open_watches(kubeconfig, "pytorchjobs")

    async def triggerer() -> dict[str, dict[str, Any]]:
        tasks = {name: asyncio.create_task(run_trigger(TrainingJobTrigger(**stored[name]))) for name in names}
        await wait_for_async(lambda: open_watches(kubeconfig, "pytorchjobs") > baseline, 30, "the shared watch")
        await asyncio.sleep(1.0)  # every trigger has subscribed by now
        assert not any(task.done() for task in tasks.values())
        assert open_watches(kubeconfig, "pytorchjobs") - baseline <= 4  # 1: one per namespace and kind

        before = await asyncio.to_thread(requests, kubeconfig)
        await asyncio.sleep(IDLE_SECONDS)
        idle = await asyncio.to_thread(requests, kubeconfig) - before
        assert idle / IDLE_SECONDS < 1.0, f"{idle} requests in {IDLE_SECONDS:g} s at idle"

        # a user kills one deferred task: its job goes (3.3+; 3.2 keeps it), the others keep waiting
        killed = tasks.pop(names[0])
        killed.cancel(user_kill_message())
        with contextlib.suppress(asyncio.CancelledError):
            await killed
        gone = await asyncio.to_thread(client.find, "PyTorchJob", names[0], test_namespace) is None
        assert gone == compat.TRIGGER_ON_KILL
        # a triggerer restart cancels another without a message: its job stays, to resume elsewhere
        moved = tasks.pop(names[1])
        moved.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await moved
        assert await asyncio.to_thread(client.find, "PyTorchJob", names[1], test_namespace) is not None
        await asyncio.sleep(0.5)
        assert not any(task.done() for task in tasks.values())
        assert open_watches(kubeconfig, "pytorchjobs") - baseline == 1

        # the rest finish at once (one fails): every task gets its own event
        for name in tasks:
            if name == names[-1]:
                await asyncio.to_thread(job_driver.fail, "PyTorchJob", name, test_namespace)
            else:
                await asyncio.to_thread(job_driver.succeed, "PyTorchJob", name, test_namespace)
        events = dict(zip(tasks, await asyncio.wait_for(asyncio.gather(*tasks.values()), 60), strict=True))

        # and the resumed one, on "another triggerer" (a new trigger from the same row), still fires
        await asyncio.to_thread(job_driver.succeed, "PyTorchJob", names[1], test_namespace)
        events[names[1]] = await asyncio.wait_for(run_trigger(TrainingJobTrigger(**stored[names[1]])), 60)
        # nobody waits any more: the watch closes
        await wait_for_async(lambda: open_watches(kubeconfig, "pytorchjobs") == baseline, 30, "the watch to close")
        return events

    events = asyncio.run(asyncio.wait_for(triggerer(), 180))
    assert sorted(events) == sorted(names[1:])
    for name, payload in events.items():
        assert payload["status"] == "finished" and payload["name"] == name and payload["uid"] == uids[name]
        assert payload["job"]["state"] == ("Failed" if name == names[-1] else "Succeeded"), payload
