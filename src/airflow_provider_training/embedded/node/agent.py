"""The node agent: the kubelet of the embedded control plane. It runs each Pod of the store as a
supervised group of local processes and reports their state back into the Pod's status.

Runs inside the daemon as a controller. For a new pod: admission (``capacity``, a job's pods
together), a loopback address (``network``), volumes and environment (``podspec``), then a
supervisor process in its own session (``supervisor``, forked by the ``zygote``) that survives the
daemon. Supervisors ping
``node/agent.sock`` after each change of ``state.json``; the agent copies it into the pod status
(phase, container states, restart counts, exit codes). When the daemon starts again it adopts the
supervisors it finds under ``node/pods/<uid>/`` whose pods still exist and stops the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded import podlogs
from airflow_provider_training.embedded.events import record_event
from airflow_provider_training.embedded.node import isolation, podspec
from airflow_provider_training.embedded.node.capacity import Capacity
from airflow_provider_training.embedded.node.network import Network, shared_network
from airflow_provider_training.embedded.node.runtime import Runtime
from airflow_provider_training.embedded.resources import BY_KEY, PODS
from airflow_provider_training.embedded.runtime import ControllerContext
from airflow_provider_training.embedded.store import NotFoundError, Store, now_timestamp

log = logging.getLogger(__name__)
CONFIGMAPS = BY_KEY["core/configmaps"]
SECRETS = BY_KEY["core/secrets"]
ENTRY = Path(__file__).with_name("entry.py")
COMPONENT = "kubelet"
TERMINAL = ("Succeeded", "Failed")
RESYNC_INTERVAL = 1.0
# A supervisor forked by the zygote takes its lock within milliseconds; one that has neither written
# its state nor taken its lock after this long died before it could.
SUPERVISOR_START_GRACE = 5.0


def backoff_settings() -> dict[str, float]:
    """``AIRFLOW_TRAINING_RESTART_BACKOFF`` (first delay, s) and ``…_MAX``: the kubelet's 10 s / 300 s."""
    return {
        "initial": float(os.environ.get("AIRFLOW_TRAINING_RESTART_BACKOFF", "10")),
        "max": float(os.environ.get("AIRFLOW_TRAINING_RESTART_BACKOFF_MAX", "300")),
        "reset": float(os.environ.get("AIRFLOW_TRAINING_RESTART_BACKOFF_RESET", "600")),
    }


def lock_held(path: Path) -> bool:
    try:
        with open(path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return False
    except OSError:
        return False


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
    started_events: dict[str, int] = field(default_factory=dict)
    backoff_events: set[tuple[str, int]] = field(default_factory=set)


class NodeAgent:
    name = "node-agent"

    def __init__(self) -> None:
        self.tracked: dict[str, Tracked] = {}
        self.waiting: dict[str, tuple[str, str]] = {}  # uid -> (namespace, name)
        self.reported: dict[str, str] = {}  # uid -> last scheduling / config message recorded

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
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.socket_path = self.node_dir / "agent.sock"
        self.zygote: subprocess.Popen[bytes] | None = None
        self.use_zygote = os.environ.get("AIRFLOW_TRAINING_ZYGOTE", "1") != "0"
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
            self._stop_zygote()
            if transport is not None:
                asyncio.get_running_loop().remove_reader(transport.fileno())
                transport.close()

    async def _probe(self) -> str:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            str(ENTRY),
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
            if event.type == "MODIFIED":
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
                self._on_pod(payload)
            elif kind == "state" and payload not in synced:
                synced.add(payload)
                if payload in self.tracked:
                    self._sync(self.tracked[payload])
            elif kind == "tick":
                self._resync()
            elif kind == "config":
                self._refresh_volumes(*payload)
        self._start_waiting()

    def _on_pod(self, event: Any) -> None:
        pod = event.object
        uid = pod["metadata"].get("uid", "")
        if event.type == "DELETED":
            self.waiting.pop(uid, None)
            self.reported.pop(uid, None)
            if uid in self.tracked:
                self._terminate(self.tracked[uid])
            return
        if uid in self.tracked or uid in self.waiting:
            return
        status = pod.get("status") or {}
        if status.get("phase") in TERMINAL:
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
            except OSError as exc:
                log.warning("cannot update the %s %s in pod %s: %s", kind, event.name, tracked.name, exc)

    def _resync(self) -> None:
        for tracked in list(self.tracked.values()):
            if tracked.deleting:
                if not lock_held(tracked.directory / "supervisor.lock"):
                    self._forget(tracked)
            elif not tracked.done:
                self._sync(tracked)

    # -- starting pods --------------------------------------------------------------------------
    def _start_waiting(self) -> None:
        if not self.waiting:
            return
        groups: dict[str, list[dict[str, Any]]] = {}
        for uid, (namespace, name) in list(self.waiting.items()):
            pod = self.store.get(PODS.key, namespace, name)
            if pod is None or pod["metadata"].get("uid") != uid:
                self.waiting.pop(uid)
                continue
            owner = next(
                (r.get("uid") for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")), uid
            )
            groups.setdefault(str(owner), []).append(pod)
        for pods in groups.values():
            decision = self.capacity.admit(pods)
            if not decision.admitted:
                for pod in pods:
                    self._unschedulable(pod, decision.message)
                continue
            for pod in pods:
                uid = pod["metadata"]["uid"]
                if decision.warning_reason:
                    self._event(pod, "Warning", decision.warning_reason, decision.message)
                if not self._start(pod, decision.gpus.get(uid, [])):
                    self.capacity.release(uid)

    def _unschedulable(self, pod: dict[str, Any], message: str) -> None:
        uid = pod["metadata"]["uid"]
        if self.reported.get(uid) == message:
            return
        self.reported[uid] = message
        self._event(pod, "Warning", "FailedScheduling", message, component="default-scheduler")
        status = pod.setdefault("status", {})
        status["phase"] = "Pending"
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": now_timestamp(),
            }
        ]
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
            self._config_error(pod, exc)
            return False
        self.waiting.pop(uid, None)
        self.reported.pop(uid, None)
        spec.update(logs=str(self.ctx.home.logs), notify=str(self.socket_path), backoff=self.backoff)
        if self.isolation == isolation.LINKS:
            for container in spec["initContainers"] + spec["containers"]:
                problems = isolation.link([isolation.Mount.from_dict(m) for m in container["mounts"]])
                for problem in problems:
                    self._event(pod, "Warning", "FailedMount", problem)
        shutil.rmtree(podlogs.container_log_dir(self.ctx.home, namespace, name, "x").parent, ignore_errors=True)
        (directory / "spec.json").write_text(json.dumps(spec))
        process = self._spawn_supervisor(directory)
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

    # -- supervisors ----------------------------------------------------------------------------
    def _spawn_supervisor(self, directory: Path) -> subprocess.Popen[bytes] | None:
        """Fork the pod's supervisor from the zygote (None), or start it directly (its Popen)."""
        if self.use_zygote:
            for _ in range(2):
                zygote = self._zygote()
                if zygote is None or zygote.stdin is None:
                    break
                try:
                    zygote.stdin.write(f"{directory}\n".encode())
                    zygote.stdin.flush()
                    return None
                except OSError:
                    log.warning("the supervisor zygote ended (exit code %s); starting another", zygote.poll())
                    self.zygote = None
        with open(directory / "supervisor.log", "ab") as errors:
            return subprocess.Popen(
                [sys.executable, "-I", "-S", str(ENTRY), "run", str(directory)],
                stdin=subprocess.DEVNULL,
                stdout=errors,
                stderr=errors,
                start_new_session=True,
                close_fds=True,
            )

    def _zygote(self) -> subprocess.Popen[bytes] | None:
        if self.zygote is not None and self.zygote.poll() is None:
            return self.zygote
        try:
            with open(self.node_dir / "zygote.log", "ab") as errors:
                self.zygote = subprocess.Popen(
                    [sys.executable, "-I", "-S", str(ENTRY), "zygote"],
                    stdin=subprocess.PIPE,
                    stdout=errors,
                    stderr=errors,
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError as exc:
            log.warning("cannot start the supervisor zygote (%s); starting supervisors directly", exc)
            self.use_zygote = False
            return None
        return self.zygote

    def _stop_zygote(self) -> None:
        """Closing its stdin ends it; the supervisors it forked keep running."""
        zygote, self.zygote = self.zygote, None
        if zygote is None:
            return
        with contextlib.suppress(OSError):
            if zygote.stdin is not None:
                zygote.stdin.close()
        try:
            zygote.wait(timeout=2)
        except subprocess.TimeoutExpired:
            zygote.kill()
            zygote.wait()

    def _config_error(self, pod: dict[str, Any], exc: podspec.PodConfigError) -> None:
        uid = pod["metadata"]["uid"]
        if self.reported.get(uid) == exc.message:
            return
        self.reported[uid] = exc.message
        if exc.reason == "FailedMount":
            self._event(pod, "Warning", "FailedMount", exc.message)
        else:
            self._event(pod, "Warning", "Failed", f"Error: {exc.message}")
        status = pod.setdefault("status", {})
        status["phase"] = "Pending"
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {
                    "waiting": {
                        "reason": exc.reason if exc.reason != "FailedMount" else "ContainerCreating",
                        "message": exc.message,
                    }
                },
            }
            for c in pod.get("spec", {}).get("containers") or []
        ]
        self._write(pod)

    def _lost(self, pod: dict[str, Any]) -> None:
        status = pod.setdefault("status", {})
        status["phase"] = "Failed"
        status["reason"] = "NodeLost"
        status["message"] = "the pod's processes were lost (no supervisor state under the data directory)"
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
            if not tracked.done and not lock_held(tracked.directory / "supervisor.lock"):
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
        self._apply_state(pod, state)
        if json.dumps(pod.get("status"), sort_keys=True) != before:
            self._write(pod)
        self._container_events(tracked, pod, state)

    @staticmethod
    def _never_started(tracked: Tracked) -> bool:
        if tracked.process is not None:
            return tracked.process.poll() is not None
        return time.monotonic() - tracked.started > SUPERVISOR_START_GRACE and not lock_held(
            tracked.directory / "supervisor.lock"
        )

    def _apply_state(self, pod: dict[str, Any], state: dict[str, Any]) -> None:
        status = pod.setdefault("status", {})
        phase = state.get("phase") or "Pending"
        status["phase"] = phase
        if state.get("message"):
            status["message"] = state["message"]
        if state.get("initContainerStatuses"):
            status["initContainerStatuses"] = state["initContainerStatuses"]
        status["containerStatuses"] = state.get("containerStatuses") or []
        inits_done = all(
            "terminated" in (c.get("state") or {}) and c["state"]["terminated"].get("exitCode") == 0
            for c in state.get("initContainerStatuses") or []
        )
        ready = phase == "Running" and all(c.get("ready") for c in status["containerStatuses"])
        why = "PodCompleted" if phase in TERMINAL else "ContainersNotReady"
        wanted = [
            ("Initialized", inits_done, "" if inits_done else "ContainersNotInitialized"),
            ("Ready", ready, "" if ready else why),
            ("ContainersReady", ready, "" if ready else why),
            ("PodScheduled", True, ""),
        ]
        old = {c["type"]: c for c in status.get("conditions") or []}
        now = now_timestamp()
        conditions = []
        for type_, ok, reason in wanted:
            value = "True" if ok else "False"
            previous = old.get(type_)
            stamp = previous["lastTransitionTime"] if previous and previous.get("status") == value else now
            condition: dict[str, Any] = {
                "type": type_,
                "status": value,
                "lastProbeTime": None,
                "lastTransitionTime": stamp,
            }
            if reason:
                condition["reason"] = reason
            conditions.append(condition)
        status["conditions"] = conditions

    def _container_events(self, tracked: Tracked, pod: dict[str, Any], state: dict[str, Any]) -> None:
        for c in (state.get("initContainerStatuses") or []) + (state.get("containerStatuses") or []):
            name, restarts, current = c["name"], int(c.get("restartCount", 0)), c.get("state") or {}
            if "running" in current and tracked.started_events.get(name, -1) < restarts:
                tracked.started_events[name] = restarts
                self._event(pod, "Normal", "Started", f"Started container {name}")
            waiting = current.get("waiting") or {}
            if waiting.get("reason") == "CrashLoopBackOff" and (name, restarts) not in tracked.backoff_events:
                tracked.backoff_events.add((name, restarts))
                self._event(
                    pod,
                    "Warning",
                    "BackOff",
                    f"Back-off restarting failed container {name} in pod "
                    f"{pod['metadata']['name']}_{pod['metadata']['namespace']}({tracked.uid})",
                )

    def _supervisor_died(self, tracked: Tracked) -> None:
        tracked.done = True
        self.capacity.release(tracked.uid)
        pod = self.store.get(PODS.key, tracked.namespace, tracked.name)
        if pod is None or pod["metadata"].get("uid") != tracked.uid:
            return
        if (pod.get("status") or {}).get("phase") in TERMINAL:
            return
        log.error(
            "the supervisor of %s/%s ended unexpectedly; see %s",
            tracked.namespace,
            tracked.name,
            tracked.directory / "supervisor.log",
        )
        self._lost(pod)

    # -- stopping pods --------------------------------------------------------------------------
    def _terminate(self, tracked: Tracked) -> None:
        tracked.deleting = True
        (tracked.directory / "deleted").touch()
        self.capacity.release(tracked.uid)
        if lock_held(tracked.directory / "supervisor.lock"):
            with contextlib.suppress(OSError, ValueError):
                pid = int((tracked.directory / "supervisor.pid").read_text())
                os.kill(pid, signal.SIGTERM)
        else:
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
