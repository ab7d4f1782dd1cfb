"""One bad pod never stops the node: the node agent runs in-process against a real store and starts
real processes; broken pods written around the API (as an older daemon or a buggy controller could
have stored them) sit beside valid ones, which still start and succeed, while each broken one gets
the waiting reason and event a kubelet gives and is tried again on a back-off."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.embedded.controllers.batchjobs import BatchJobController
from airflow_provider_training.embedded.node.agent import NodeAgent
from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.resources import BY_KEY, PODS
from airflow_provider_training.embedded.runtime import ControllerContext
from airflow_provider_training.embedded.store import Store
from airflow_provider_training.embedded.tls import ensure_certificates
from tests.fixtures import heavy
from tests.waiting import wait_for

CONFIGMAPS, SECRETS, EVENTS = BY_KEY["core/configmaps"], BY_KEY["core/secrets"], BY_KEY["core/events"]


class Node:
    """A store and a node agent on an event loop of its own thread."""

    def __init__(self, root: Path) -> None:
        self.home = Home(root)
        self.home.ensure()
        ensure_certificates(self.home)  # what the daemon makes first: pods get an in-cluster config from it
        self.store = Store(self.home.store)
        self.store.create(BY_KEY["core/namespaces"].key, {"metadata": {"name": "default"}})
        self.ctx = ControllerContext(store=self.store, home=self.home)
        self.loop = asyncio.new_event_loop()
        self.agent = NodeAgent()
        self.jobs = BatchJobController()
        self.task: Any = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def both() -> None:
            await asyncio.gather(self.agent.run(self.ctx), self.jobs.run(self.ctx))

        self.task = self.loop.create_task(both())
        with contextlib.suppress(asyncio.CancelledError):
            self.loop.run_until_complete(self.task)

    def stop(self) -> None:
        def cancel() -> None:
            self.ctx.stopping.set()
            if self.task is not None:
                self.task.cancel()

        self.loop.call_soon_threadsafe(cancel)
        self.thread.join(10)
        for tracked in list(self.agent.tracked.values()):
            self.agent._terminate(tracked)
        self.store.close()

    def pod(self, name: str) -> dict[str, Any]:
        pod = self.store.get(PODS.key, "default", name)
        assert pod is not None
        return pod

    def events(self, name: str) -> list[tuple[str, str]]:
        items = self.store.list(EVENTS.key, "default").items
        return [(e["reason"], e["message"]) for e in items if e["involvedObject"]["name"] == name]


@heavy()  # a node agent starting real pod processes
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    monkeypatch.setenv("AIRFLOW_TRAINING_ZYGOTE", "0")
    monkeypatch.setenv("AIRFLOW_TRAINING_POD_RETRY", "0.2")
    monkeypatch.setenv("AIRFLOW_TRAINING_POD_RETRY_MAX", "0.4")
    n = Node(tmp_path / "home")
    yield n
    n.stop()


def pod(name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "python:3.11", "command": [sys.executable, "-c", "print('ok')"]}
    container.update(spec.pop("container", {}))
    body: dict[str, Any] = {"containers": [container], "restartPolicy": "Never"}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": body}


def phase(p: dict[str, Any]) -> str | None:
    return (p.get("status") or {}).get("phase")


def waiting(p: dict[str, Any]) -> dict[str, Any]:
    statuses = (p.get("status") or {}).get("containerStatuses") or [{}]
    return dict((statuses[0].get("state") or {}).get("waiting") or {})


def test_valid_pods_start_beside_every_kind_of_broken_one(node: Node, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "airflow_provider_training.embedded.node.agent")
    long_key = "k" * 253
    node.store.create(
        SECRETS.key,
        {"metadata": {"name": "not-base64", "namespace": "default"}, "data": {"password": "hunter2!"}},
    )
    node.store.create(
        CONFIGMAPS.key, {"metadata": {"name": "long-key", "namespace": "default"}, "data": {long_key: "v"}}
    )
    secret_env = {"name": "P", "valueFrom": {"secretKeyRef": {"name": "not-base64", "key": "password"}}}
    broken = {
        "grace-x": pod("grace-x", terminationGracePeriodSeconds="x"),
        "secret-not-base64": pod("secret-not-base64", container={"env": [secret_env]}),
        "cpu-not-a-quantity": pod("cpu-not-a-quantity", container={"resources": {"limits": {"cpu": "lots"}}}),
        "env-not-a-list": pod("env-not-a-list", container={"env": "A=1"}),
        "volumes-not-a-list": pod("volumes-not-a-list", volumes="x"),
        "volume-without-name": pod("volume-without-name", volumes=[{"emptyDir": {}}]),
        "missing-configmap": pod("missing-configmap", container={"envFrom": [{"configMapRef": {"name": "nope"}}]}),
    }
    for obj in broken.values():
        node.store.create(PODS.key, obj)
    valid = [f"valid-{i}" for i in range(3)]
    for name in valid:
        node.store.create(PODS.key, pod(name))
    odd_owner = pod("owner-refs-not-a-list")  # not needed to run it, so it runs
    odd_owner["metadata"]["ownerReferences"] = "me"
    node.store.create(PODS.key, odd_owner)
    valid.append("owner-refs-not-a-list")
    # a 253-character key is legal; the pod that mounts it runs and reads the file
    read_long = f"print(open('/etc/cm/{long_key}').read())"
    node.store.create(
        PODS.key,
        pod(
            "long-key-mounted",
            container={
                "command": [sys.executable, "-c", read_long],
                "volumeMounts": [{"name": "cm", "mountPath": "/etc/cm"}],
            },
            volumes=[{"name": "cm", "configMap": {"name": "long-key"}}],
        ),
    )
    valid.append("long-key-mounted")

    wait_for(lambda: all(phase(node.pod(n)) == "Succeeded" for n in valid), 60, "valid pods")
    wait_for(lambda: all(waiting(node.pod(n)) for n in broken), 20, "broken pods' waiting reasons")
    for name in broken:
        p = node.pod(name)
        assert phase(p) == "Pending", name
        state = waiting(p)
        assert state["reason"] == "CreateContainerConfigError", (name, state)
        assert any(reason == "Failed" and message.startswith("Error: ") for reason, message in node.events(name))
    assert "not base64" in waiting(node.pod("secret-not-base64"))["message"]
    assert "hunter2" not in str(node.pod("secret-not-base64")) + str(node.events("secret-not-base64"))
    assert (
        "terminationGracePeriodSeconds" in waiting(node.pod("grace-x"))["message"]
        or "x" in waiting(node.pod("grace-x"))["message"]
    )
    assert 'configmap "nope" not found' in waiting(node.pod("missing-configmap"))["message"]

    # Retried with back-off (several attempts by now), yet each failure was logged and evented once.
    time.sleep(1.5)
    assert len([e for e in node.events("grace-x") if e[0] == "Failed"]) == 1
    assert sum("grace-x" in r.getMessage() for r in caplog.records) == 1
    assert not any(r.exc_info for r in caplog.records)

    # A broken pod that gets fixed (here: its ConfigMap appears) starts without waiting for a restart.
    node.store.create(CONFIGMAPS.key, {"metadata": {"name": "nope", "namespace": "default"}, "data": {"A": "1"}})
    wait_for(lambda: phase(node.pod("missing-configmap")) == "Succeeded", 20, "fixed pod")


def test_secret_fixed_to_base64_lets_the_pod_start(node: Node) -> None:
    secret = {"metadata": {"name": "s", "namespace": "default"}, "data": {"k": "not base64!"}}
    node.store.create(SECRETS.key, secret)
    env = [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    node.store.create(
        PODS.key,
        pod("p", container={"env": env, "command": [sys.executable, "-c", "import os; print(os.environ['K'])"]}),
    )
    wait_for(lambda: waiting(node.pod("p")).get("reason") == "CreateContainerConfigError", 20, "config error")
    fixed = node.store.get(SECRETS.key, "default", "s")
    assert fixed is not None
    fixed["data"] = {"k": base64.b64encode(b"hello").decode()}
    node.store.update(SECRETS.key, fixed)
    wait_for(lambda: phase(node.pod("p")) == "Succeeded", 20, "pod after the fix")
    log = node.home.logs / "default" / "p" / "main" / "0.log"
    assert log.read_text().strip().endswith(" hello")


def test_no_volume_path_leaves_its_volume(node: Node, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    # A symlink a container planted in a claim earlier: a later subPath through it must not follow it out.
    claim = node.home.claim_dir("default", "data")
    claim.mkdir(parents=True)
    (claim / "link").symlink_to(outside)
    node.store.create(CONFIGMAPS.key, {"metadata": {"name": "c", "namespace": "default"}, "data": {"k": "v"}})
    write = [sys.executable, "-c", "open('/m/planted', 'w').write('x')"]

    def mounted(name: str, volume: dict[str, Any], sub_path: str | None = None) -> dict[str, Any]:
        mount: dict[str, Any] = {"name": "v", "mountPath": "/m"}
        if sub_path is not None:
            mount["subPath"] = sub_path
        return pod(name, container={"command": write, "volumeMounts": [mount]}, volumes=[{"name": "v", **volume}])

    escapes = {
        "subpath-up": mounted("subpath-up", {"emptyDir": {}}, "../../../outside"),
        "subpath-absolute": mounted("subpath-absolute", {"emptyDir": {}}, str(outside)),
        "subpath-symlink": mounted("subpath-symlink", {"persistentVolumeClaim": {"claimName": "data"}}, "link"),
        "claim-up": mounted("claim-up", {"persistentVolumeClaim": {"claimName": "../../../../outside"}}),
        "items-up": mounted(
            "items-up", {"configMap": {"name": "c", "items": [{"key": "k", "path": "../../../../outside/k"}]}}
        ),
        "volume-name-up": pod("volume-name-up", volumes=[{"name": "../../../outside", "emptyDir": {}}]),
    }
    for obj in escapes.values():
        node.store.create(PODS.key, obj)
    node.store.create(PODS.key, mounted("inside", {"persistentVolumeClaim": {"claimName": "data"}}, "sub/dir"))
    wait_for(lambda: phase(node.pod("inside")) == "Succeeded", 30, "the pod whose subPath stays inside")
    assert (claim / "sub" / "dir" / "planted").read_text() == "x"
    wait_for(lambda: all(waiting(node.pod(n)) for n in escapes), 20, "refusals")
    for name in escapes:
        state = waiting(node.pod(name))
        assert state["reason"] in ("CreateContainerConfigError", "ContainerCreating"), (name, state)
        text = state["message"]
        assert "outside its volume" in text or "must not contain '..'" in text or "relative path" in text, (name, text)
        assert phase(node.pod(name)) == "Pending"
    assert list(outside.iterdir()) == []
    assert not (node.home.root / "volumes" / "outside").exists()


def test_broken_batch_jobs_do_not_hold_up_a_valid_one(node: Node, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "airflow_provider_training.embedded")
    jobs = BY_KEY["batch/jobs"]

    def batch_job(name: str, **spec: Any) -> dict[str, Any]:
        template = pod("x")["spec"]
        template.update(spec.pop("template_spec", {}))
        body = {"template": {"spec": template}, "backoffLimit": 0, "completions": 1, "parallelism": 1, **spec}
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": body,
        }

    def store_job(obj: dict[str, Any]) -> None:
        # Written around the API, as an older daemon could have stored it (admission refuses these
        # now), but with the selector and labels the API server generates for a Job.
        uid = str(uuid.uuid4())
        if isinstance(obj["spec"].get("template"), dict):
            labels = {"batch.kubernetes.io/controller-uid": uid}
            obj["spec"]["template"]["metadata"] = {"labels": labels}
            obj["spec"]["selector"] = {"matchLabels": labels}
        node.store.create(jobs.key, obj, uid=uid)

    store_job(batch_job("bad-template", template_spec={"terminationGracePeriodSeconds": "x"}))
    store_job(batch_job("bad-parallelism", parallelism="x"))
    store_job(batch_job("template-not-a-map", template="x"))
    store_job(batch_job("good"))

    def complete(name: str) -> bool:
        job = node.store.get(jobs.key, "default", name) or {}
        return any(c.get("type") == "Complete" for c in (job.get("status") or {}).get("conditions") or [])

    wait_for(lambda: complete("good"), 60, "the valid Job to complete")
    bad_pods = [
        p for p in node.store.list(PODS.key, "default").items if p["metadata"]["name"].startswith("bad-template")
    ]
    assert bad_pods, "the Job with a bad template field still gets its pod"
    wait_for(
        lambda: waiting(node.pod(bad_pods[0]["metadata"]["name"])).get("reason") == "CreateContainerConfigError",
        20,
        "its pod refused",
    )
    time.sleep(3)  # several retries of the broken Jobs by now: each failure is logged once, not per retry
    for name in ("bad-parallelism", "template-not-a-map"):
        lines = [r for r in caplog.records if name in r.getMessage()]
        assert 1 <= len(lines) <= 2, [r.getMessage() for r in lines]
