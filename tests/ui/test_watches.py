"""The cockpit's log follow against the embedded control plane: it survives the container
restarting (the new container's log follows from its first line) and ends with the replica."""

from __future__ import annotations

import asyncio
import uuid

from airflow_provider_training.ui.watches import follow_log
from tests.factories import simple_job as job

CRASH_ONCE = """
import pathlib, sys
marker = pathlib.Path({marker!r})
if not marker.exists():
    marker.write_text("crashed")
    print("first container: crashing", flush=True)
    sys.exit(1)
print("second container: done", flush=True)
"""


async def _follow(
    kubeconfig: str, namespace: str, body: dict, pod: str, *, after_finish: bool = False
) -> list[tuple[str, str]]:
    from airflow_provider_training.hooks.training import AsyncTrainingHook

    hook = AsyncTrainingHook(kubernetes_conn_id=None, connection_extras={"kube_config_path": kubeconfig})
    async with hook.get_client() as jobs:
        await jobs.create(body, namespace)
        if after_finish:  # the page is opened once it is all over
            await jobs.wait(body["kind"], body["metadata"]["name"], namespace, timeout=90)
        return [event async for event in follow_log(hook, jobs, namespace, pod, "pytorch", tail=100, seconds=30)]


def test_follow_survives_a_container_restart_and_ends_with_the_replica(control_plane, test_namespace, tmp_path):
    name = f"restart-{uuid.uuid4().hex[:6]}"
    body = job("PyTorchJob", name, {"Master": 1}, script=CRASH_ONCE.format(marker=str(tmp_path / "marker")))
    body["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] = "OnFailure"
    events = asyncio.run(
        asyncio.wait_for(_follow(str(control_plane.kubeconfig), test_namespace, body, f"{name}-master-0"), 120)
    )
    assert ("line", "first container: crashing") in events
    assert ("restart", "1") in events
    assert ("line", "second container: done") in events
    assert events.index(("line", "first container: crashing")) < events.index(("restart", "1"))
    assert events.index(("restart", "1")) < events.index(("line", "second container: done"))
    assert events[-1] == ("end", "Succeeded")
    assert events.count(("line", "first container: crashing")) == 1  # nothing is shown twice


def test_follow_opened_after_the_restart_shows_the_crashed_container_first(control_plane, test_namespace, tmp_path):
    name = f"late-{uuid.uuid4().hex[:6]}"
    body = job("PyTorchJob", name, {"Master": 1}, script=CRASH_ONCE.format(marker=str(tmp_path / "marker")))
    body["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] = "OnFailure"
    events = asyncio.run(
        asyncio.wait_for(
            _follow(str(control_plane.kubeconfig), test_namespace, body, f"{name}-master-0", after_finish=True), 120
        )
    )
    assert events == [
        ("line", "first container: crashing"),
        ("restart", "1"),
        ("line", "second container: done"),
        ("end", "Succeeded"),
    ]
