"""The node agent: the kubelet of the embedded control plane. It runs each Pod of the store as a
supervised group of local processes and reports their state back into the Pod's status.

Runs inside the daemon as a controller. For a new pod: admission (``capacity``, a job's pods
together), a loopback address (``network``), volumes and environment (``podspec``), then a
supervisor process in its own session (``supervisor``, forked by the ``zygote``) that survives the
daemon. Supervisors ping
``node/agent.sock`` after each change of ``state.json``; the agent copies it into the pod status
(phase, container states, restart counts, exit codes). When the daemon starts again it adopts the
supervisors it finds under ``node/pods/<uid>/`` whose pods still exist and stops the others.

The agent is a controller of the runtime (``runtime.run``): pods are its keys (``For``), ConfigMap
and Secret events wake the pods waiting for them (``Watches``), and the supervisors' notifications
and a resync timer add keys to the same work queue, so a burst of changes of one pod is one pass.
A pass writes the pod's latest status, as a kubelet's status manager does: the binding with the
first write, a final phase at once, anything else after ``AIRFLOW_TRAINING_POD_STATUS_BATCH``.

This module is the reconcile and its store reads and writes; ``lifecycle`` starts, stops and checks
supervisors (and what a dead one left running), ``podstatus`` computes status and events from a
supervisor's state without I/O, and ``podspec`` turns a Pod into what its supervisor runs. A pod that
runs as images (``oci.containerruntime``: opt-in) first has its images pulled (on threads: the pod waits and
comes back when they end), then each container's supervisor runs a runc bundle instead of a command. Each
per-pod step is isolated: one pod's failure is that pod's status and events, never the node's.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import dataclasses
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded import podlogs, serviceaccount
from airflow_provider_training.embedded import runtime as controller_runtime
from airflow_provider_training.embedded.events import new_event, record_event, record_events
from airflow_provider_training.embedded.network import LOCALHOST, Network, shared_network
from airflow_provider_training.embedded.node import (
    inclusterconfig,
    isolation,
    lifecycle,
    podexec,
    podspec,
    podstatus,
    rundir,
)
from airflow_provider_training.embedded.node.capacity import Capacity
from airflow_provider_training.embedded.node.execbroker import ExecBroker
from airflow_provider_training.embedded.node.oci import bundle as oci_bundle
from airflow_provider_training.embedded.node.oci.containerruntime import OCI, OciRuntime, PullPending
from airflow_provider_training.embedded.node.profiles import Runtime
from airflow_provider_training.embedded.resources import BY_KEY, EVENTS, PODS
from airflow_provider_training.embedded.runtime import (
    ControllerContext,
    For,
    OwnWrites,
    Watches,
    WorkQueue,
    slow_start_batch,
)
from airflow_provider_training.embedded.runtime.controller import Key, key_of
from airflow_provider_training.embedded.store import NotFoundError, Store, WatchEvent, now_timestamp
from airflow_provider_training.specs.unstructured import Unstructured, controller_of

log = logging.getLogger(__name__)
CONFIGMAPS = BY_KEY["core/configmaps"]
SECRETS = BY_KEY["core/secrets"]
COMPONENT = "kubelet"
RESYNC_INTERVAL = 1.0
TOKEN_CHECK_INTERVAL = 60.0  # expiring tokens are renewed at 80 % of their life (48 min of Trainer's hour)
NO_SANDBOX = (
    "this host cannot give pods a mount view of their own (no Linux mount namespaces here), so a pod's "
    "processes can read the control plane's data directory (its admin token, the service-account "
    "signing key, the store) and other pods' files; run only pods you trust (docs/embedded.md)"
)
UNSCHEDULABLE_RETRY = 5.0  # besides the retry each time a pod gives back what it held
SIBLINGS_PER_YIELD = 100


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


def report_window() -> float:
    """``AIRFLOW_TRAINING_POD_STATUS_BATCH`` (s): how long a pod's non-final status change may wait
    to be written, so that the next one replaces it (a kubelet's status manager also writes only the
    latest status). A final phase is written at once."""
    return float(os.environ.get("AIRFLOW_TRAINING_POD_STATUS_BATCH", "0.1"))


@dataclass
class Tracked:
    uid: str
    namespace: str
    name: str
    directory: Path
    process: subprocess.Popen[bytes] | None = None  # when started directly, not by the zygote
    started: float = field(default_factory=time.monotonic)
    state_mtime: int = 0
    state: dict[str, Any] | None = None  # the supervisor's last state read
    done: bool = False
    deleting: bool = False
    seen: podstatus.Seen = field(default_factory=podstatus.Seen)
    # Container processes its dead supervisor left running, being stopped (SIGTERM, then SIGKILL
    # at ``orphans_deadline``) before the pod's fate is decided.
    orphans_deadline: float | None = None
    # The binding (nodeName, addresses, PodScheduled) not yet in the store: it goes with the pod's
    # first status write, so a fast pod costs one write, not one to bind and one per state.
    binding: dict[str, Any] | None = None
    # Since when the pod has a change not yet written (monotonic), None when the store is current.
    unwritten_since: float | None = None
    address: str = ""  # the pod's address, published (``podspec.endpoints_dir``) once a container started
    published: bool = False
    # The kubelet's events of the states read but not yet written: they go in the transaction of
    # the status write that reports those states.
    events: list[podstatus.Event] = field(default_factory=list)

    @property
    def key(self) -> Key:
        return key_of(PODS.key, self.namespace, self.name)


class NodeAgent:
    """Reconciles pods (``For`` pods, keyed by namespace/name) on the controller runtime's work
    queue; supervisor notifications and a resync timer add keys to the same queue, and ConfigMap /
    Secret changes wake the pods waiting for them."""

    name = "node-agent"

    def __init__(self) -> None:
        self.tracked: dict[str, Tracked] = {}
        # (namespace, name) -> uid -> Tracked: a reconcile looks up its pod's without a scan of
        # every pod this node ran (finished pods stay tracked until deleted)
        self.named: dict[tuple[str, str], dict[str, Tracked]] = {}
        self.published: collections.Counter[str] = collections.Counter()  # address -> pods publishing it
        self.waiting: dict[str, Key] = {}  # uid -> key of a pod not yet started (cannot start, no room)
        # The waiting pods as last seen (kept current by their events), by uid and by name: a group's
        # siblings are found without reading and decoding each from the store, once per pod of it.
        self.waiting_pods: dict[str, dict[str, Any]] = {}
        self.waiting_names: dict[tuple[str, str], str] = {}
        # owner uid -> (the capacity epoch, the uids of its group) of the last group refused: a pod of
        # it is not tried again until something is given back or the group changes.
        self.refused_groups: dict[str, tuple[int, frozenset[str]]] = {}
        self.capacity_epoch = 0
        self.reported: dict[str, str] = {}  # uid -> last scheduling / config message recorded
        self.retry: dict[str, tuple[float, float]] = {}  # uid -> (next attempt, monotonic; delay)
        self.failures: dict[str, str] = {}  # step -> last error logged, so a failure is logged once
        self.work: WorkQueue[Key] = WorkQueue()
        self.own_writes = OwnWrites()
        self.window = report_window()
        self.broker = ExecBroker(Path())  # (its node directory is known once the agent runs)

    @property
    def sources(self) -> tuple[For | Watches, ...]:
        return (
            For(PODS.key),
            Watches(CONFIGMAPS.key, self._waiting_in_namespace),
            Watches(SECRETS.key, self._waiting_in_namespace),
        )

    # -- set-up -------------------------------------------------------------------------------
    async def run(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.store: Store = ctx.store
        self.node_dir = ctx.home.root / "node"
        rundir.pods_dir(self.node_dir)  # (in memory where the machine has a tmpfs)
        self.isolation = os.environ.get("AIRFLOW_TRAINING_ISOLATION") or await self._probe()
        self.network: Network = shared_network(ctx.home)
        self.runtime = Runtime.from_settings(ctx.home.root)
        self.capacity = Capacity.from_env()
        self.backoff = backoff_settings()
        self.retry_initial, self.retry_max = retry_settings()
        self.socket_path = self.node_dir / "agent.sock"
        # published again by the pods found running below (a pod gone while the daemon was down is not)
        for published in rundir.runtime_dir(self.node_dir, "endpoints").iterdir():
            published.unlink(missing_ok=True)
        # what no pod's view shows, but for the node's kit / kubectl shims KitOps images run
        self.sandbox = isolation.Sandbox(rundir.hidden(self.node_dir), (str(self.node_dir / "bin"),))
        self.supervisors = lifecycle.Supervisors(
            self.node_dir,
            (serviceaccount.MOUNT_PATH,) if self.isolation == isolation.NAMESPACE else (),
            self.sandbox,
        )
        self.supervisors.warm()
        loop = asyncio.get_running_loop()

        # image mode (opt-in): pulls run on threads and queue their pod again when they end
        def wake(uid: str) -> None:
            loop.call_soon_threadsafe(self._pulled, uid)

        self.oci = OciRuntime(ctx.home.root, self.node_dir, wake, self._event)
        self.broker.node_dir = self.node_dir
        self.broker.serve()  # MPI launchers' exec into their workers (their views hide the node)
        transport = await self._listen()
        log.info(
            "node agent: mounts by %s, %d GPU(s), pod addresses %s",
            self.isolation,
            len(self.capacity.gpus),
            "127.1.x.y" if self.network.routable else "127.0.0.1 (shared)",
        )
        if self.isolation != isolation.NAMESPACE:
            log.warning("node agent: %s", NO_SANDBOX)
        self._adopt()
        tick = asyncio.create_task(self._tick())
        try:
            await controller_runtime.run(self, ctx, self.work, on_event=self._on_event, own_writes=self.own_writes)
        finally:
            tick.cancel()
            self.oci.close()
            self.broker.close()
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
                tracked = self.tracked.get(data.decode(errors="replace"))
                if tracked is not None:
                    self.work.add(tracked.key)  # a pod already queued is not queued twice: one pass

        asyncio.get_running_loop().add_reader(sock.fileno(), readable)
        return sock

    async def _tick(self) -> None:
        """Supervisors that died without a word and pods being stopped are checked on a timer; tokens
        that expire are renewed every ``TOKEN_CHECK_INTERVAL``."""
        next_token_check = time.monotonic() + TOKEN_CHECK_INTERVAL
        while True:
            await asyncio.sleep(RESYNC_INTERVAL)
            for tracked in list(self.tracked.values()):
                if not tracked.done or tracked.deleting:
                    self.work.add(tracked.key)
            if time.monotonic() >= next_token_check:
                next_token_check = time.monotonic() + TOKEN_CHECK_INTERVAL
                self._isolated("token rotation", self._refresh_tokens)

    def _refresh_tokens(self) -> None:
        """Expiring projected tokens (Trainer's status token) of running pods, renewed as the kubelet does."""
        now = time.time()
        for tracked in list(self.tracked.values()):
            if tracked.done or tracked.deleting:
                continue
            pod = self.store.get(PODS.key, tracked.namespace, tracked.name)
            if pod is not None and pod["metadata"].get("uid") == tracked.uid:
                inclusterconfig.refresh_tokens(self.store, self.ctx.home, pod, tracked.directory / "volumes", now)

    # -- adoption after a restart ---------------------------------------------------------------
    def _adopt(self) -> None:
        for directory in sorted((self.node_dir / "pods").iterdir()):
            try:
                spec = json.loads((directory / "spec.json").read_text())
            except (OSError, ValueError):
                self._remove_pod_dirs(directory)
                continue
            tracked = Tracked(spec["uid"], spec["namespace"], spec["pod"], directory)
            tracked.address = str(spec.get("podIP") or "")
            pod = self.store.get(PODS.key, tracked.namespace, tracked.name)
            self._track(tracked)
            if pod is None or pod["metadata"].get("uid") != tracked.uid:
                self._terminate(tracked)
            else:
                log.info("adopted pod %s/%s", tracked.namespace, tracked.name)
                if not (pod.get("spec") or {}).get("nodeName"):
                    tracked.binding = self._binding(pod, spec.get("podIP") or LOCALHOST, now_timestamp())
                self._sync(tracked)

    # -- events -------------------------------------------------------------------------------
    def _on_event(self, event: WatchEvent) -> None:
        """Bookkeeping before the keys are worked off: a deleted pod is stopped at once, a changed
        ConfigMap / Secret reaches the running pods that show it as a volume."""
        if event.resource == PODS.key:
            if event.type == "DELETED":
                self._isolated(f"delete {event.namespace}/{event.name}", self._on_deleted, event.object)
            elif event.object.get("metadata", {}).get("uid") in self.waiting_pods:
                self.waiting_pods[event.object["metadata"]["uid"]] = event.object
            return
        if event.type == "MODIFIED":
            kind = "configmap" if event.resource == CONFIGMAPS.key else "secret"
            self._isolated("config volumes", self._refresh_volumes, kind, event)

    def _waiting_in_namespace(self, event: WatchEvent) -> list[Key]:
        """A ConfigMap / Secret appeared or changed: pods waiting for it are tried again at once."""
        if event.type == "DELETED":
            return []
        keys = []
        for uid, key in list(self.waiting.items()):
            if key.namespace == event.namespace:
                self.retry.pop(uid, None)
                keys.append(key)
        return keys

    def _wait(self, pod: Unstructured) -> None:
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        self.waiting[uid] = key_of(PODS.key, meta["namespace"], meta["name"])
        self.waiting_pods[uid] = pod
        self.waiting_names[(meta["namespace"], meta["name"])] = uid

    def _unwait(self, uid: str) -> None:
        key = self.waiting.pop(uid, None)
        self.waiting_pods.pop(uid, None)
        if key is not None and self.waiting_names.get((key.namespace, key.name)) == uid:
            del self.waiting_names[(key.namespace, key.name)]

    def _on_deleted(self, pod: Unstructured) -> None:
        uid = pod["metadata"].get("uid", "")
        self.oci.forget(uid)
        self._unwait(uid)
        self.refused_groups.pop(_controller_uid(pod), None)  # its group changed
        self.reported.pop(uid, None)
        self.retry.pop(uid, None)
        if uid in self.tracked:
            self._terminate(self.tracked[uid])

    def _isolated(self, step: str, fn: Any, *args: Any) -> None:
        """Run one bookkeeping step; an error is logged once per step and message, and never stops
        the other pods' steps (a pod's own reconcile is retried by the work queue)."""
        try:
            fn(*args)
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            if self.failures.get(step) != text:
                self.failures[step] = text
                log.warning("node agent: %s failed: %s", step, text, exc_info=log.isEnabledFor(logging.DEBUG))
        else:
            self.failures.pop(step, None)

    def _refresh_volumes(self, kind: str, event: WatchEvent) -> None:
        """A ConfigMap / Secret changed: running pods that show it as a volume see the new files (MPI's
        ``discover_hosts.sh`` when the worker set changes, for one)."""
        context = podspec.Context(
            self.store, self.ctx.home, self.runtime, self.node_dir, self.isolation, "", self.sandbox
        )
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

    # -- reconcile ------------------------------------------------------------------------------
    async def reconcile(self, key: Key) -> float | None:
        """One pod: stop what its deletion left, report its supervisor's state, or start it."""
        same_name = list(self.named.get((key.namespace, key.name), {}).values())
        wake: list[float] = []
        for tracked in same_name:
            if tracked.deleting:
                if not lifecycle.alive(tracked.directory) and not self._stop_orphans(tracked):
                    self._forget(tracked)
            else:
                # (a pod this node runs is not read here: its deletion arrives as an event first,
                # and the status write reads it)
                delay = self._sync(tracked)
                if delay is not None:
                    wake.append(delay)
        if not any(not t.deleting for t in same_name):
            pod = self.store.get(PODS.key, key.namespace, key.name)
            if pod is not None and pod["metadata"].get("uid", "") not in self.tracked:
                delay = await self._consider(pod)
                if delay is not None:
                    wake.append(delay)
        return min(wake) if wake else None

    async def _consider(self, pod: Unstructured) -> float | None:
        """A pod this node does not run yet: start it with the other waiting pods of its owner (one
        job's pods are admitted together), or note why not; the seconds until it is tried again."""
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        if (pod.get("status") or {}).get("phase") in podstatus.TERMINAL or meta.get("deletionTimestamp"):
            self._unwait(uid)
            return None
        node = (pod.get("spec") or {}).get("nodeName")
        if node == podspec.NODE_NAME:
            # Started by an earlier daemon, but its supervisor directory is gone: the pod is lost.
            self._lost(pod)
            return None
        if node:
            return None  # bound to another node: not ours to run, as a kubelet leaves other nodes' pods alone
        self._wait(pod)
        pending = self._retry_in(uid)
        if pending is not None:
            return pending  # failed to start a moment ago: its back-off has not passed
        owner = _controller_uid(pod)
        refused = self.refused_groups.get(owner) if owner else None
        if refused is not None and refused[0] == self.capacity_epoch and uid in refused[1]:
            return UNSCHEDULABLE_RETRY  # its group was refused as it is, and nothing was given back since
        group = [pod, *await self._waiting_siblings(pod)]
        admitted = await self._start_group(group)
        if uid in self.tracked:
            self.refused_groups.pop(owner or "", None)
            return None
        if owner and not admitted:  # (room, not a pod's own error: a ConfigMap that appears retries it)
            self.refused_groups[owner] = (self.capacity_epoch, frozenset(p["metadata"]["uid"] for p in group))
        pending = self._retry_in(uid)
        return pending if pending is not None else UNSCHEDULABLE_RETRY

    def _retry_in(self, uid: str) -> float | None:
        at = self.retry.get(uid, (0.0, 0.0))[0] - time.monotonic()
        return at if at > 0 else None

    async def _waiting_siblings(self, pod: Unstructured) -> list[Unstructured]:
        """The other pods of the same controlling owner that wait to start on this node."""
        meta = pod["metadata"]
        owner = _controller_uid(pod)
        if not owner:
            return []
        siblings = []
        read = 0
        for resource, namespace, name in self.store.dependents(owner):
            if resource != PODS.key or name == meta["name"]:
                continue
            known = self.waiting_pods.get(self.waiting_names.get((namespace, name), ""))
            if known is None:
                read += 1
                if read % SIBLINGS_PER_YIELD == 0:
                    await asyncio.sleep(0)  # a 1,000-pod job's siblings are a thousand reads, the first time
            other = known if known is not None else self.store.get(PODS.key, namespace, name)
            if other is None:
                continue
            other_uid = other["metadata"].get("uid", "")
            if (
                other_uid in self.tracked
                or (other.get("spec") or {}).get("nodeName")
                or (other.get("status") or {}).get("phase") in podstatus.TERMINAL
                or other["metadata"].get("deletionTimestamp")
                or self._retry_in(other_uid) is not None
            ):
                continue
            self._wait(other)
            siblings.append(other)
        return siblings

    # -- starting pods --------------------------------------------------------------------------
    async def _start_group(self, pods: list[Unstructured]) -> bool:
        """Start a group's pods together; False when there is no room for the group."""
        try:
            decision = self.capacity.admit(pods)
        except Exception as exc:  # a field the scheduler cannot read (a quantity that is none)
            for pod in pods:
                self._cannot_start(pod, podspec.PodConfigError("CreateContainerConfigError", _describe(exc)))
            return True
        if not decision.admitted:
            # (in slow-start batches, as every write of a large group: the loop serves others between;
            # each batch's statuses and events one transaction)
            pending: list[tuple[dict[str, Any], list[tuple[str, Unstructured]]]] = []
            await slow_start_batch(
                pods,
                lambda pod: self._unschedulable(pod, decision.message, pending),
                after_batch=lambda: self._store_statuses(pending),
            )
            return False
        with self.network.batch():  # the group's addresses persisted once, before any of them runs
            for pod in pods:
                self.network.pod_address(pod["metadata"]["namespace"], pod["metadata"]["name"])
        started_pods: list[Unstructured] = []

        def start(pod: Unstructured) -> None:
            uid = pod["metadata"]["uid"]
            if decision.warning_reason:
                self._event(pod, "Warning", decision.warning_reason, decision.message)
            try:
                # (deleted while the loop served others between batches: not started)
                started = self._still_stored(pod) and self._start(pod, decision.gpus.get(uid, []))
            except Exception as exc:
                # Whatever went wrong with this pod stays with this pod: it gets the status and
                # event a kubelet gives, and is tried again after its back-off.
                self._remove_pod_dirs(self.node_dir / "pods" / uid)
                self._cannot_start(pod, podspec.PodConfigError("CreateContainerConfigError", _describe(exc)))
                started = False
            if started:
                started_pods.append(pod)
            else:
                self.capacity.release(uid)

        await slow_start_batch(pods, start)
        # the scheduler's events once every process of the group is on its way, in one transaction
        record_events(
            self.store,
            [
                (
                    pod,
                    "Normal",
                    "Scheduled",
                    f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to "
                    f"{podspec.NODE_NAME}",
                    "default-scheduler",
                )
                for pod in started_pods
            ],
        )
        return True

    def _still_stored(self, pod: Unstructured) -> bool:
        meta = pod["metadata"]
        current = self.store.get(PODS.key, meta["namespace"], meta["name"])
        return current is not None and current["metadata"].get("uid") == meta["uid"]

    def _unschedulable(
        self, pod: Unstructured, message: str, pending: list[tuple[dict[str, Any], list[tuple[str, Unstructured]]]]
    ) -> None:
        """Queue the pod's PodScheduled=False status and its FailedScheduling event on ``pending``."""
        uid = pod["metadata"]["uid"]
        # The same reason with other counts (the group grew: "(N GPU(s) wanted, ...)") is no news:
        # rewriting every waiting pod of a large job each time one more arrived was quadratic.
        if (self.reported.get(uid) or "\0").split(" (", 1)[0] == message.split(" (", 1)[0]:
            return
        self.reported[uid] = message
        event = podstatus.unschedulable(pod.setdefault("status", {}), message, now_timestamp())
        pending.append((pod, [(EVENTS.key, new_event(pod, *event, "default-scheduler"))]))

    def _store_statuses(self, pending: list[tuple[dict[str, Any], list[tuple[str, Unstructured]]]]) -> None:
        """The queued statuses (and events) over the stored pods, in one transaction."""
        items = [
            (pod["metadata"]["namespace"], pod["metadata"]["name"], self._status_change(pod), also)
            for pod, also in pending
        ]
        pending.clear()
        for written in self.store.update_many_with(PODS.key, items):
            if written is not None:
                self.own_writes.add(written)

    def _start(self, pod: Unstructured, gpu_ids: list[str]) -> bool:
        meta = pod["metadata"]
        uid, namespace, name = meta["uid"], meta["namespace"], meta["name"]
        directory = self.node_dir / "pods" / uid
        directory.mkdir(parents=True, exist_ok=True)
        pod_ip = self.network.pod_address(namespace, name)
        context = podspec.Context(
            self.store, self.ctx.home, self.runtime, self.node_dir, self.isolation, pod_ip, self.sandbox
        )
        try:
            images = None
            if self.oci.wants(pod):  # its containers' images, pulled (oci/containerruntime.py)
                images = self.oci.images_for(pod, lambda ns, name: self.store.get(SECRETS.key, ns, name))
                context = dataclasses.replace(context, isolation=isolation.NAMESPACE)  # volumes as mounts
            spec = podspec.build(context, pod, directory, gpu_ids, bool(self.capacity.gpus), images)
            if images is not None:
                self.oci.finish(spec, pod, images, directory)
        except PullPending:
            self._remove_pod_dirs(directory)
            return False  # queued again when its pulls end (``_pulled``)
        except podspec.PodConfigError as exc:
            self._remove_pod_dirs(directory)
            self._cannot_start(pod, exc)
            return False
        self._unwait(uid)
        self.reported.pop(uid, None)
        self.retry.pop(uid, None)
        spec.update(
            home=str(self.ctx.home.root),
            logs=str(self.ctx.home.logs),
            notify=str(self.socket_path),
            backoff=self.backoff,
        )
        if self.isolation == isolation.LINKS:
            for container in spec["initContainers"] + spec["containers"]:
                problems = isolation.link([isolation.Mount.from_dict(m) for m in container["mounts"]])
                for problem in problems:
                    self._event(pod, "Warning", "FailedMount", problem)
        shutil.rmtree(podlogs.container_log_dir(self.ctx.home, namespace, name, "x").parent, ignore_errors=True)
        (directory / "spec.json").write_text(json.dumps(spec))
        process = self.supervisors.spawn(directory)
        tracked = Tracked(uid, namespace, name, directory, process)
        tracked.address = pod_ip
        self._warn_unsandboxed(pod, spec)
        tracked.binding = self._binding(pod, pod_ip, now_timestamp())
        tracked.unwritten_since = tracked.started
        self._track(tracked)
        # The binding is written with the first state the supervisor reports, or alone once the
        # report window has passed without one (the pod's reconcile comes back then).
        self.work.add_after(tracked.key, self.window)
        return True

    def _warn_unsandboxed(self, pod: Unstructured, spec: dict[str, Any]) -> None:
        """One Warning event per pod for what of it this node does not enforce."""
        if spec.get("warnings"):
            self._event(
                pod,
                "Warning",
                "SecurityContextNotEnforced",
                "not enforced by the embedded node: " + "; ".join(dict.fromkeys(spec["warnings"])),
            )
        if self.isolation != isolation.NAMESPACE and spec.get("runtime") != OCI:
            self._event(pod, "Warning", "NoSandbox", NO_SANDBOX)

    @staticmethod
    def _binding(pod: Unstructured, pod_ip: str, now: str) -> Unstructured:
        """What binding the pod to this node sets: the status a kubelet reports before the containers run."""
        scheduled = {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        return {
            "phase": "Pending",
            "hostIP": LOCALHOST,
            "hostIPs": [{"ip": LOCALHOST}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": (pod.get("status") or {}).get("startTime") or now,
            "conditions": [scheduled],
        }

    def _cannot_start(self, pod: Unstructured, exc: podspec.PodConfigError) -> None:
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

    def _lost(self, pod: Unstructured, stopped: bool = False, tracked: Tracked | None = None) -> None:
        podstatus.lost(pod.setdefault("status", {}), stopped, now_timestamp())
        self._write(pod, tracked)

    # -- state -> status ------------------------------------------------------------------------
    def _sync(self, tracked: Tracked) -> float | None:
        """Read the supervisor's state; record its events; write the pod's status when it changed
        (a final phase at once, anything else once the report window has passed, so that a burst
        of changes is one write). Returns the seconds until a deferred write is due."""
        if self._read_state(tracked):
            self._publish(tracked)
            tracked.events += podstatus.container_events(
                tracked.state or {}, tracked.seen, tracked.name, tracked.namespace, tracked.uid
            )
            if tracked.unwritten_since is None:
                tracked.unwritten_since = time.monotonic()
        if tracked.deleting:
            self._record_events(tracked)
            return None
        if tracked.unwritten_since is None:
            return None
        final = (tracked.state or {}).get("phase") in podstatus.TERMINAL or tracked.done
        wait = tracked.unwritten_since + self.window - time.monotonic()
        if not final and wait > 0:
            return wait
        self._report(tracked)
        return None

    def _record_events(self, tracked: Tracked, pod: Unstructured | None = None) -> None:
        """The events not yet written, alone (no status write to go with them); ``pod``: the stored
        pod when the caller has just read it."""
        events, tracked.events = tracked.events, []
        if not events:
            return
        if pod is None:
            pod = self.store.get(PODS.key, tracked.namespace, tracked.name)
        if pod is not None and pod["metadata"].get("uid") == tracked.uid:
            record_events(self.store, [(pod, *event, COMPONENT) for event in events])

    def _publish(self, tracked: Tracked) -> None:
        """The pod's address resolves once one of its containers has started (``init-pytorch`` of
        the workers waits for the master's)."""
        if tracked.published or not tracked.address or tracked.deleting:
            return
        statuses = (tracked.state or {}).get("containerStatuses") or []
        if any("running" in (s.get("state") or {}) or "terminated" in (s.get("state") or {}) for s in statuses):
            tracked.published = True
            self.published[tracked.address] += 1
            with contextlib.suppress(OSError):
                (podspec.endpoints_dir(self.node_dir) / tracked.address).touch()

    def _unpublish(self, tracked: Tracked) -> None:
        if not tracked.published:
            return
        tracked.published = False
        self.published[tracked.address] -= 1
        if self.published[tracked.address] > 0:
            return  # another pod still has it (where 127/8 is not routable, every pod is 127.0.0.1)
        del self.published[tracked.address]
        with contextlib.suppress(OSError):
            (podspec.endpoints_dir(self.node_dir) / tracked.address).unlink()

    def _read_state(self, tracked: Tracked) -> bool:
        """Whether the supervisor wrote a new state (kept in ``tracked.state``); notices a supervisor
        that never started or died."""
        path = tracked.directory / "state.json"
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            if not tracked.deleting and self._never_started(tracked):
                self._supervisor_died(tracked)
            return False
        if mtime == tracked.state_mtime:
            if not tracked.done and not lifecycle.alive(tracked.directory):
                self._supervisor_died(tracked)
            return False
        tracked.state_mtime = mtime
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        tracked.state = state
        if state.get("done"):
            tracked.done = True
            if tracked.process is not None:
                tracked.process.poll()
            self._release(tracked.uid)
        return True

    def _report(self, tracked: Tracked, pod: Unstructured | None = None) -> None:
        tracked.unwritten_since = None
        if pod is None:
            pod = self.store.get(PODS.key, tracked.namespace, tracked.name)
        if pod is None or pod["metadata"].get("uid") != tracked.uid:
            if not tracked.deleting:
                self._terminate(tracked)  # deleted (or replaced) while no event told this node
            return
        spec = pod.setdefault("spec", {})
        before = (copy.deepcopy(pod.get("status")), spec.get("nodeName"))
        status = pod.setdefault("status", {})
        if tracked.binding is not None:
            status.update(tracked.binding)
            spec["nodeName"] = podspec.NODE_NAME
        if tracked.state is not None:
            podstatus.apply_state(status, tracked.state, now_timestamp())
        tracked.binding = None
        if (status, spec.get("nodeName")) == before:
            self._record_events(tracked, pod)
            return  # no write when nothing a client could see changed
        events, tracked.events = tracked.events, []
        also = [(EVENTS.key, new_event(pod, *event, COMPONENT)) for event in events]
        with contextlib.suppress(NotFoundError):  # (just read: the stored pod with a new status)
            self._store_status(pod, also)

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
        self._release(tracked.uid)
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
        tracked.unwritten_since = None
        self._lost(pod, stopped=tracked.orphans_deadline is not None, tracked=tracked)

    def _pulled(self, uid: str) -> None:
        """A pull of a waiting pod ended: try it again now."""
        key = self.waiting.get(uid)
        if key is not None:
            self.retry.pop(uid, None)
            self.work.add(key)

    def _release(self, uid: str) -> None:
        """Give back what a pod held; pods waiting for room are tried again."""
        if uid in self.capacity.held:
            self.capacity.release(uid)
            self.capacity_epoch += 1
            for key in self.waiting.values():
                self.work.add(key)

    # -- stopping pods --------------------------------------------------------------------------
    def _terminate(self, tracked: Tracked) -> None:
        tracked.deleting = True
        self._unpublish(tracked)
        (tracked.directory / "deleted").touch()
        self._release(tracked.uid)
        if lifecycle.alive(tracked.directory):
            lifecycle.ask_to_stop(tracked.directory)
        elif not self._stop_orphans(tracked):
            self._forget(tracked)

    def _track(self, tracked: Tracked) -> None:
        self.tracked[tracked.uid] = tracked
        self.named.setdefault((tracked.namespace, tracked.name), {})[tracked.uid] = tracked

    def _untrack(self, tracked: Tracked) -> None:
        self.tracked.pop(tracked.uid, None)
        named = self.named.get((tracked.namespace, tracked.name), {})
        named.pop(tracked.uid, None)
        if not named:
            self.named.pop((tracked.namespace, tracked.name), None)

    def _forget(self, tracked: Tracked) -> None:
        if tracked.process is not None:
            tracked.process.poll()
        self._remove_pod_dirs(tracked.directory)
        self._untrack(tracked)
        same_name = bool(self.named.get((tracked.namespace, tracked.name))) or tracked.key in self.waiting.values()
        if not same_name:
            shutil.rmtree(self.ctx.home.logs / tracked.namespace / tracked.name, ignore_errors=True)

    # -- store helpers --------------------------------------------------------------------------
    def _write(
        self, pod: Unstructured, tracked: Tracked | None = None, events: tuple[tuple[str, str, str, str], ...] = ()
    ) -> None:
        """Write the pod's status (and its binding: nodeName, or ``tracked``'s binding not yet
        written) over the stored pod, if it is still the same pod; ``events`` (type, reason,
        message, component) in the same transaction."""
        status = pod.get("status") or {}
        if tracked is not None and tracked.binding is not None:
            status = {**tracked.binding, **status}
            pod.setdefault("spec", {})["nodeName"] = podspec.NODE_NAME
            tracked.binding = None
        pod["status"] = status
        also = [(EVENTS.key, new_event(pod, *event)) for event in events]
        with contextlib.suppress(NotFoundError):
            self._store_status(pod, also)

    def _store_status(self, pod: Unstructured, also: list[tuple[str, Unstructured]]) -> None:
        """``pod``'s status and nodeName over the stored pod, read and written as one step (a
        client's write to the pod meanwhile is kept), if it is still the same pod."""
        meta = pod["metadata"]
        written = self.store.update_with(
            PODS.key, meta["namespace"], meta["name"], self._status_change(pod), also_create=also
        )
        if written is not None:
            self.own_writes.add(written)

    @staticmethod
    def _status_change(pod: Unstructured) -> Callable[[dict[str, Any]], Unstructured | None]:
        """``pod``'s status and nodeName over the stored pod, if it is still the same pod."""
        meta = pod["metadata"]

        def change(current: Unstructured) -> Unstructured | None:
            if current["metadata"].get("uid") != meta.get("uid"):
                return None
            current["status"] = pod.get("status") or {}
            if (pod.get("spec") or {}).get("nodeName"):
                current.setdefault("spec", {})["nodeName"] = pod["spec"]["nodeName"]
            return current

        return change

    def _remove_pod_dirs(self, directory: Path) -> None:
        """A pod's runtime directory and its disk-backed emptyDir volumes."""
        podexec.kill_registered(directory)  # a supervisor that died could not
        shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(rundir.empty_dir(self.node_dir, directory.name), ignore_errors=True)
        shutil.rmtree(oci_bundle.writable_dir(self.node_dir, directory.name), ignore_errors=True)

    def _event(self, pod: Unstructured, type_: str, reason: str, message: str, component: str = COMPONENT) -> None:
        record_event(self.store, pod, type_, reason, message, component)


def _controller_uid(pod: Unstructured) -> str:
    """The uid of the pod's controlling owner ("" when none)."""
    ref = controller_of(pod)
    return str(ref.get("uid") or "") if ref is not None else ""


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


def _containers(pod: Unstructured) -> list[Unstructured]:
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list):
        return []
    return [c for c in containers if isinstance(c, dict) and isinstance(c.get("name"), str)]
