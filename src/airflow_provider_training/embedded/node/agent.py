"""The node agent: the kubelet of the embedded control plane. It runs each Pod of the store as a
supervised group of local processes and reports their state back into the Pod's status.

Runs inside the daemon as a controller. For a new pod: admission (``capacity``, a job's pods
together), a loopback address (``network``), volumes and environment (``podspec``), then a
supervisor process in its own session (``supervisor``, forked by the ``zygote``) that survives the
daemon. Supervisors ping
``node/agent.sock`` after each change of ``state.json``; the agent copies it into the pod status
(phase, container states, restart counts, exit codes). When the daemon starts again it adopts the
supervisors it finds under ``node/pods/<uid>/`` whose pods still exist and stops the others.

This module is the loop and its store reads and writes; ``lifecycle`` starts, stops and checks
supervisors (and what a dead one left running), ``podstatus`` computes status and events from a
supervisor's state without I/O, and ``podspec`` turns a Pod into what its supervisor runs. Each
per-pod step is isolated: one pod's failure is that pod's status and events, never the node's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded import podlogs
from airflow_provider_training.embedded.events import record_event
from airflow_provider_training.embedded.network import Network, shared_network
from airflow_provider_training.embedded.node import isolation, lifecycle, podspec, podstatus
from airflow_provider_training.embedded.node.capacity import Capacity
from airflow_provider_training.embedded.node.runtime import Runtime
from airflow_provider_training.embedded.resources import BY_KEY, PODS
from airflow_provider_training.embedded.runtime import ControllerContext
from airflow_provider_training.embedded.store import NotFoundError, Store, now_timestamp

log = logging.getLogger(__name__)
CONFIGMAPS = BY_KEY["core/configmaps"]
SECRETS = BY_KEY["core/secrets"]
COMPONENT = "kubelet"
RESYNC_INTERVAL = 1.0


def backoff_settings() -> dict[str, float]:
    """``AIRFLOW_TRAINING_RESTART_BACKOFF`` (first delay, s) and ``…_MAX``: the kubelet's 10 s / 300 s."""
    return {
        "initial": float(os.environ.get("AIRFLOW_TRAINING_RESTART_BACKOFF", "10")),
        "max": float(os.environ.get("AIRFLOW_TRAINING_RESTART_BACKOFF_MAX", "300")),
        "reset": float(os.environ.get("AIRFLOW_TRAINING_RESTART_BACKOFF_RESET", "600")),
    }


def retry_settings() -> tuple[float, float]:
    """A pod that cannot start is tried again after ``AIRFLOW_TRAINING_POD_RETRY`` seconds, doubling
    up to ``…_MAX`` (the kubelet re-syncs such a pod on its own back-off), so broken pods cost the
    node little while the valid ones proceed."""
    return (
        float(os.environ.get("AIRFLOW_TRAINING_POD_RETRY", "1")),
        float(os.environ.get("AIRFLOW_TRAINING_POD_RETRY_MAX", "20")),
    )


@dataclass
class Tracked:
    uid: str
    namespace: str
    name: str
    directory: Path
    process: subprocess.Popen[bytes] | None = None  # when started directly, not by the zygote
    started: float = field(default_factory=time.monotonic)
    state_mtime: int = 0
    done: bool = False
    deleting: bool = False
    seen: podstatus.Seen = field(default_factory=podstatus.Seen)
    # Container processes its dead supervisor left running, being stopped (SIGTERM, then SIGKILL
    # at ``orphans_deadline``) before the pod's fate is decided.
    orphans_deadline: float | None = None


class NodeAgent:
    name = "node-agent"

    def __init__(self) -> None:
        self.tracked: dict[str, Tracked] = {}
        self.waiting: dict[str, tuple[str, str]] = {}  # uid -> (namespace, name)
        self.reported: dict[str, str] = {}  # uid -> last scheduling / config message recorded
        self.retry: dict[str, tuple[float, float]] = {}  # uid -> (next attempt, monotonic; delay)
        self.failures: dict[str, str] = {}  # step -> last error logged, so a failure is logged once

    # -- set-up -------------------------------------------------------------------------------
    async def run(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.store: Store = ctx.store
        self.node_dir = ctx.home.root / "node"
        (self.node_dir / "pods").mkdir(parents=True, exist_ok=True)
        self.isolation = os.environ.get("AIRFLOW_TRAINING_ISOLATION") or await self._probe()
        self.network: Network = shared_network(ctx.home)
        self.runtime = Runtime.from_settings(ctx.home.root)
        self.capacity = Capacity.from_env()
        self.backoff = backoff_settings()
        self.retry_initial, self.retry_max = retry_settings()
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.socket_path = self.node_dir / "agent.sock"
        self.supervisors = lifecycle.Supervisors(self.node_dir)
        transport = await self._listen()
        log.info(
            "node agent: mounts by %s, %d GPU(s), pod addresses %s",
            self.isolation,
            len(self.capacity.gpus),
            "127.1.x.y" if self.network.routable else "127.0.0.1 (shared)",
        )
        self._adopt()
        tasks = [
            asyncio.create_task(self._watch_pods()),
            asyncio.create_task(self._tick()),
            asyncio.create_task(self._watch_config("configmap", CONFIGMAPS.key)),
            asyncio.create_task(self._watch_config("secret", SECRETS.key)),
        ]
        try:
            while not ctx.stopping.is_set():
                batch = [await self.queue.get()]
                while not self.queue.empty():
                    batch.append(self.queue.get_nowait())
                self._handle(batch)
        finally:
            for task in tasks:
                task.cancel()
            self.supervisors.stop_zygote()
            if transport is not None:
                asyncio.get_running_loop().remove_reader(transport.fileno())
                transport.close()

    async def _probe(self) -> str:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            str(lifecycle.ENTRY),
            "probe",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        out, _ = await proc.communicate()
        mode = out.decode().strip()
        return mode if mode in (isolation.NAMESPACE, isolation.LINKS) else isolation.LINKS

    async def _listen(self) -> socket.socket | None:
        self.socket_path.unlink(missing_ok=True)
        if len(str(self.socket_path)) > 100:  # AF_UNIX path limit: fall back to the resync timer
            log.warning(
                "%s is too long for a socket; pod states are picked up every %ss", self.socket_path, RESYNC_INTERVAL
            )
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(str(self.socket_path))
        sock.setblocking(False)

        def readable() -> None:
            while True:
                try:
                    data = sock.recv(512)
                except (BlockingIOError, InterruptedError):
                    return
                self.queue.put_nowait(("state", data.decode(errors="replace")))

        asyncio.get_running_loop().add_reader(sock.fileno(), readable)
        return sock

    async def _watch_pods(self) -> None:
        async for event in self.ctx.informer(PODS.key):
            self.queue.put_nowait(("pod", event))

    async def _watch_config(self, kind: str, resource: str) -> None:
        async for event in self.ctx.informer(resource):
            if event.type in ("ADDED", "MODIFIED"):
                self.queue.put_nowait(("config", (kind, event)))

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(RESYNC_INTERVAL)
            self.queue.put_nowait(("tick", None))

    # -- adoption after a restart ---------------------------------------------------------------
    def _adopt(self) -> None:
        for directory in sorted((self.node_dir / "pods").iterdir()):
            try:
                spec = json.loads((directory / "spec.json").read_text())
            except (OSError, ValueError):
                shutil.rmtree(directory, ignore_errors=True)
                continue
            tracked = Tracked(spec["uid"], spec["namespace"], spec["pod"], directory)
            pod = self.store.get(PODS.key, tracked.namespace, tracked.name)
            self.tracked[tracked.uid] = tracked
            if pod is None or pod["metadata"].get("uid") != tracked.uid:
                self._terminate(tracked)
            else:
                log.info("adopted pod %s/%s", tracked.namespace, tracked.name)
                self._sync(tracked)

    # -- events -------------------------------------------------------------------------------
    def _handle(self, batch: list[tuple[str, Any]]) -> None:
        synced: set[str] = set()
        for kind, payload in batch:
            if kind == "pod":
                self._isolated(f"pod event {kind}", self._on_pod, payload)
            elif kind == "state" and payload not in synced:
                synced.add(payload)
                if payload in self.tracked:
                    self._isolated(f"sync {payload}", self._sync, self.tracked[payload])
            elif kind == "tick":
                self._resync()
            elif kind == "config":
                self._isolated("config volumes", self._on_config, *payload)
        self._isolated("start", self._start_waiting)

    def _isolated(self, step: str, fn: Any, *args: Any) -> None:
        """Run one per-object step; an error is logged once per step and message (not per pass), and
        never stops the other pods' steps."""
        try:
            fn(*args)
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            if self.failures.get(step) != text:
                self.failures[step] = text
                log.warning("node agent: %s failed: %s", step, text, exc_info=log.isEnabledFor(logging.DEBUG))
        else:
            self.failures.pop(step, None)

    def _on_config(self, kind: str, event: Any) -> None:
        # A ConfigMap / Secret appeared or changed: pods waiting for it are tried again at once.
        for uid, (namespace, _name) in self.waiting.items():
            if namespace == event.namespace:
                self.retry.pop(uid, None)
        if event.type == "MODIFIED":
            self._refresh_volumes(kind, event)

    def _on_pod(self, event: Any) -> None:
        pod = event.object
        uid = pod["metadata"].get("uid", "")
        if event.type == "DELETED":
            self.waiting.pop(uid, None)
            self.reported.pop(uid, None)
            self.retry.pop(uid, None)
            if uid in self.tracked:
                self._terminate(self.tracked[uid])
            return
        if uid in self.tracked or uid in self.waiting:
            return
        status = pod.get("status") or {}
        if status.get("phase") in podstatus.TERMINAL:
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if node == podspec.NODE_NAME:
            # Started by an earlier daemon, but its supervisor directory is gone: the pod is lost.
            self._lost(pod)
            return
        if node:
            return  # bound to another node: not ours to run, as a kubelet leaves other nodes' pods alone
        self.waiting[uid] = (pod["metadata"]["namespace"], pod["metadata"]["name"])

    def _refresh_volumes(self, kind: str, event: Any) -> None:
        """A ConfigMap / Secret changed: running pods that show it as a volume see the new files (MPI's
        ``discover_hosts.sh`` when the worker set changes, for one)."""
        context = podspec.Context(self.store, self.ctx.home, self.runtime, self.node_dir, self.isolation, "")
        for tracked in list(self.tracked.values()):
            if tracked.done or tracked.deleting or tracked.namespace != event.namespace:
                continue
            pod = self.store.get(PODS.key, tracked.namespace, tracked.name)
            if pod is None or pod["metadata"].get("uid") != tracked.uid:
                continue
            try:
                podspec.refresh_config_volumes(context, pod, tracked.directory, kind, event.name)
            except (OSError, podspec.PodConfigError) as exc:
                log.warning("cannot update the %s %s in pod %s: %s", kind, event.name, tracked.name, exc)

    def _resync(self) -> None:
        for tracked in list(self.tracked.values()):
            if tracked.deleting:
                if not lifecycle.alive(tracked.directory) and not self._stop_orphans(tracked):
                    self._isolated(f"forget {tracked.uid}", self._forget, tracked)
            elif not tracked.done:
                self._isolated(f"sync {tracked.uid}", self._sync, tracked)

    # -- starting pods --------------------------------------------------------------------------
    def _start_waiting(self) -> None:
        if not self.waiting:
            return
        groups: dict[str, list[dict[str, Any]]] = {}
        now = time.monotonic()
        for uid, (namespace, name) in list(self.waiting.items()):
            if self.retry.get(uid, (0.0, 0.0))[0] > now:
                continue  # failed to start a moment ago: its back-off has not passed (a deletion is an event)
            pod = self.store.get(PODS.key, namespace, name)
            if pod is None or pod["metadata"].get("uid") != uid:
                self.waiting.pop(uid)
                self.retry.pop(uid, None)
                continue
            refs = pod["metadata"].get("ownerReferences")
            owner = (
                next(
                    (r.get("uid") for r in refs if isinstance(r, dict) and r.get("controller")),
                    uid,
                )
                if isinstance(refs, list)
                else uid
            )
            groups.setdefault(str(owner), []).append(pod)
        for pods in groups.values():
            try:
                decision = self.capacity.admit(pods)
            except Exception as exc:  # a field the scheduler cannot read (a quantity that is none)
                for pod in pods:
                    self._cannot_start(pod, podspec.PodConfigError("CreateContainerConfigError", _describe(exc)))
                continue
            if not decision.admitted:
                for pod in pods:
                    self._unschedulable(pod, decision.message)
                continue
            for pod in pods:
                uid = pod["metadata"]["uid"]
                if decision.warning_reason:
                    self._event(pod, "Warning", decision.warning_reason, decision.message)
                try:
                    started = self._start(pod, decision.gpus.get(uid, []))
                except Exception as exc:
                    # Whatever went wrong with this pod stays with this pod: it gets the status and
                    # event a kubelet gives, and is tried again after its back-off.
                    shutil.rmtree(self.node_dir / "pods" / uid, ignore_errors=True)
                    self._cannot_start(pod, podspec.PodConfigError("CreateContainerConfigError", _describe(exc)))
                    started = False
                if not started:
                    self.capacity.release(uid)

    def _unschedulable(self, pod: dict[str, Any], message: str) -> None:
        uid = pod["metadata"]["uid"]
        if self.reported.get(uid) == message:
            return
        self.reported[uid] = message
        event = podstatus.unschedulable(pod.setdefault("status", {}), message, now_timestamp())
        self._event(pod, *event, component="default-scheduler")
        self._write(pod)

    def _start(self, pod: dict[str, Any], gpu_ids: list[str]) -> bool:
        meta = pod["metadata"]
        uid, namespace, name = meta["uid"], meta["namespace"], meta["name"]
        directory = self.node_dir / "pods" / uid
        directory.mkdir(parents=True, exist_ok=True)
        pod_ip = self.network.pod_address(namespace, name)
        context = podspec.Context(self.store, self.ctx.home, self.runtime, self.node_dir, self.isolation, pod_ip)
        try:
            spec = podspec.build(context, pod, directory, gpu_ids, bool(self.capacity.gpus))
        except podspec.PodConfigError as exc:
            shutil.rmtree(directory, ignore_errors=True)
            self._cannot_start(pod, exc)
            return False
        self.waiting.pop(uid, None)
        self.reported.pop(uid, None)
        self.retry.pop(uid, None)
        spec.update(logs=str(self.ctx.home.logs), notify=str(self.socket_path), backoff=self.backoff)
        if self.isolation == isolation.LINKS:
            for container in spec["initContainers"] + spec["containers"]:
                problems = isolation.link([isolation.Mount.from_dict(m) for m in container["mounts"]])
                for problem in problems:
                    self._event(pod, "Warning", "FailedMount", problem)
        shutil.rmtree(podlogs.container_log_dir(self.ctx.home, namespace, name, "x").parent, ignore_errors=True)
        (directory / "spec.json").write_text(json.dumps(spec))
        process = self.supervisors.spawn(directory)
        self.tracked[uid] = Tracked(uid, namespace, name, directory, process)
        pod.setdefault("spec", {})["nodeName"] = podspec.NODE_NAME
        now = now_timestamp()
        status = pod.setdefault("status", {})
        status.update(
            phase="Pending",
            hostIP="127.0.0.1",
            hostIPs=[{"ip": "127.0.0.1"}],
            podIP=pod_ip,
            podIPs=[{"ip": pod_ip}],
            startTime=now,
        )
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        ]
        self._write(pod)
        self._event(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {namespace}/{name} to {podspec.NODE_NAME}",
            component="default-scheduler",
        )
        return True

    def _cannot_start(self, pod: dict[str, Any], exc: podspec.PodConfigError) -> None:
        """The pod stays Pending with the kubelet's waiting reason and one event per new message,
        and is tried again after a back-off that doubles with each failure."""
        uid = pod["metadata"]["uid"]
        _, delay = self.retry.get(uid, (0.0, 0.0))
        delay = min(self.retry_max, delay * 2) if delay else self.retry_initial
        self.retry[uid] = (time.monotonic() + delay, delay)
        if self.reported.get(uid) == exc.message:
            return
        self.reported[uid] = exc.message
        log.info(
            "pod %s/%s cannot start (%s): %s",
            pod["metadata"].get("namespace"),
            pod["metadata"].get("name"),
            exc.reason,
            exc.message,
        )
        event = podstatus.cannot_start(pod.setdefault("status", {}), _containers(pod), exc.reason, exc.message)
        self._event(pod, *event)
        self._write(pod)

    def _lost(self, pod: dict[str, Any], stopped: bool = False) -> None:
        podstatus.lost(pod.setdefault("status", {}), stopped, now_timestamp())
        self._write(pod)

    # -- state -> status ------------------------------------------------------------------------
    def _sync(self, tracked: Tracked) -> None:
        path = tracked.directory / "state.json"
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            if not tracked.deleting and self._never_started(tracked):
                self._supervisor_died(tracked)
            return
        if mtime == tracked.state_mtime:
            if not tracked.done and not lifecycle.alive(tracked.directory):
                self._supervisor_died(tracked)
            return
        tracked.state_mtime = mtime
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        if state.get("done"):
            tracked.done = True
            if tracked.process is not None:
                tracked.process.poll()
            self.capacity.release(tracked.uid)
        if tracked.deleting:
            return
        pod = self.store.get(PODS.key, tracked.namespace, tracked.name)
        if pod is None or pod["metadata"].get("uid") != tracked.uid:
            return
        before = json.dumps(pod.get("status"), sort_keys=True)
        podstatus.apply_state(pod.setdefault("status", {}), state, now_timestamp())
        if json.dumps(pod.get("status"), sort_keys=True) != before:
            self._write(pod)
        for event in podstatus.container_events(state, tracked.seen, tracked.name, tracked.namespace, tracked.uid):
            self._event(pod, *event)

    @staticmethod
    def _never_started(tracked: Tracked) -> bool:
        if tracked.process is not None:
            return tracked.process.poll() is not None
        return time.monotonic() - tracked.started > lifecycle.SUPERVISOR_START_GRACE and not lifecycle.alive(
            tracked.directory
        )

    def _stop_orphans(self, tracked: Tracked) -> bool:
        """Stop what a dead supervisor left running; True while any of it still runs."""
        running, tracked.orphans_deadline = lifecycle.stop_orphans(
            tracked.directory, tracked.orphans_deadline, f"{tracked.namespace}/{tracked.name}"
        )
        return running

    def _supervisor_died(self, tracked: Tracked) -> None:
        if self._stop_orphans(tracked):
            return  # decided once its processes are gone: never Failed while one still runs
        tracked.done = True
        self.capacity.release(tracked.uid)
        pod = self.store.get(PODS.key, tracked.namespace, tracked.name)
        if pod is None or pod["metadata"].get("uid") != tracked.uid:
            return
        if (pod.get("status") or {}).get("phase") in podstatus.TERMINAL:
            return
        log.error(
            "the supervisor of %s/%s ended unexpectedly; see %s",
            tracked.namespace,
            tracked.name,
            tracked.directory / "supervisor.log",
        )
        self._lost(pod, stopped=tracked.orphans_deadline is not None)

    # -- stopping pods --------------------------------------------------------------------------
    def _terminate(self, tracked: Tracked) -> None:
        tracked.deleting = True
        (tracked.directory / "deleted").touch()
        self.capacity.release(tracked.uid)
        if lifecycle.alive(tracked.directory):
            lifecycle.ask_to_stop(tracked.directory)
        elif not self._stop_orphans(tracked):
            self._forget(tracked)

    def _forget(self, tracked: Tracked) -> None:
        if tracked.process is not None:
            tracked.process.poll()
        shutil.rmtree(tracked.directory, ignore_errors=True)
        self.tracked.pop(tracked.uid, None)
        same_name = (
            any(t.namespace == tracked.namespace and t.name == tracked.name for t in self.tracked.values())
            or (tracked.namespace, tracked.name) in self.waiting.values()
        )
        if not same_name:
            shutil.rmtree(self.ctx.home.logs / tracked.namespace / tracked.name, ignore_errors=True)

    # -- store helpers --------------------------------------------------------------------------
    def _write(self, pod: dict[str, Any]) -> None:
        with contextlib.suppress(NotFoundError):
            current = self.store.get(PODS.key, pod["metadata"]["namespace"], pod["metadata"]["name"])
            if current is None or current["metadata"].get("uid") != pod["metadata"].get("uid"):
                return
            current["status"] = pod.get("status") or {}
            if pod.get("spec", {}).get("nodeName"):
                current.setdefault("spec", {})["nodeName"] = pod["spec"]["nodeName"]
            self.store.update(PODS.key, current, check_rv=False)

    def _event(self, pod: dict[str, Any], type_: str, reason: str, message: str, component: str = COMPONENT) -> None:
        record_event(self.store, pod, type_, reason, message, component)


def _describe(exc: BaseException) -> str:
    """One line for an unexpected error while building a pod (no traceback: it goes to the pod)."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.strerror or exc}: {exc.filename}"
    if isinstance(exc, KeyError):
        return f"invalid pod: the required field {exc.args[0]!r} is missing"
    if isinstance(exc, (TypeError, AttributeError)):
        return f"invalid pod: a field has the wrong type ({exc})"
    text = str(exc) or type(exc).__name__
    return f"invalid pod: {text}" if isinstance(exc, ValueError) else text


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list):
        return []
    return [c for c in containers if isinstance(c, dict) and isinstance(c.get("name"), str)]
