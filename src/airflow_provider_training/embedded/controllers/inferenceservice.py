"""The embedded InferenceService controller: KServe's raw-deployment mode on one machine.

For each ``serving.kserve.io/v1beta1`` InferenceService it keeps one predictor Pod of the current
spec (``predictor.py``: storage-initializer pulling the ``kit://`` ModelKit into ``/mnt/models``,
then the serving container), which the node agent runs as local processes; it probes the
predictor's readiness (the node agent runs no probes, so the controller does what the kubelet's
``readinessProbe`` would: ``GET /v2/health/ready``, or a TCP connect for a custom container
without an ``httpGet`` probe) and routes the InferenceService's stable URL (``ingress.py``) to the
ready predictor.

A spec change creates the Pod of the new revision next to the serving one; traffic moves only when
the new one is ready, and the old Pod is deleted once its in-flight requests are done. A revision
that fails (storage-initializer or predictor exits) leaves the old one serving and reports KServe's
``modelStatus`` (``BlockedByFailedLoad``, ``lastFailureInfo`` with the container's log tail, as
``terminationMessagePolicy: FallbackToLogsOnError`` gives on a cluster). Deleting the
InferenceService deletes its Pods (owner references) and closes its URL.

Status as KServe writes it: ``url``, ``address.url``, ``observedGeneration``, conditions
``IngressReady``, ``PredictorReady``, ``LatestDeploymentReady`` and ``Ready``,
``components.predictor`` (``latestCreatedRevision``, ``latestReadyRevision``, ``traffic``) and
``modelStatus``.

Settings (environment of the daemon): ``AIRFLOW_TRAINING_PROBE_INTERVAL`` (seconds between
readiness probes of a starting predictor, default 0.2), ``AIRFLOW_TRAINING_DRAIN_TIMEOUT`` (longest
wait for an old predictor's requests, default 60).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp import ClientError, ClientTimeout

from airflow_provider_training.embedded import canonical, podlogs, runtime
from airflow_provider_training.embedded.controllers.ingress import Backend, Ingress
from airflow_provider_training.embedded.controllers.predictor import (
    ISVC_LABEL,
    PREDICTOR_CONTAINER,
    Predictor,
    PredictorSpecError,
    build_pod,
    desired,
)
from airflow_provider_training.embedded.events import record_event
from airflow_provider_training.embedded.network import shared_network
from airflow_provider_training.embedded.resources import BY_KEY, PODS
from airflow_provider_training.embedded.runtime import ControllerContext, For, Owns, WorkQueue
from airflow_provider_training.embedded.store import AlreadyExistsError, NotFoundError, Store, now_timestamp
from airflow_provider_training.specs.refs import ObjectRef
from airflow_provider_training.specs.unstructured import Unstructured

log = logging.getLogger(__name__)
ISVCS = BY_KEY["serving.kserve.io/inferenceservices"]
COMPONENT = "kserve-controller-manager"
LOG_TAIL_LINES = 20
Key = runtime.controller.Key


@dataclass
class Failure:
    container: str
    exit_code: int | None
    message: str


def _float_env(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def log_tail(ctx: ControllerContext, namespace: str, pod: str, container: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of the container's newest terminated run (what FallbackToLogsOnError gives)."""
    directory = podlogs.container_log_dir(ctx.home, namespace, pod, container)
    runs = podlogs.restarts(directory)
    for restart in reversed(runs):
        path = podlogs.log_path(ctx.home, namespace, pod, container, restart)
        with contextlib.suppress(OSError):
            text = [podlogs.LogLine.parse(raw).text.rstrip("\n") for raw in path.read_text().splitlines()]
            if text:
                return "\n".join(text[-lines:])
    return ""


def failure_of(ctx: ControllerContext, pod: Unstructured) -> Failure | None:
    """Why the pod's revision cannot serve, if it cannot: a container that exited (or waits in
    CrashLoopBackOff after exiting), a container that cannot be created, or a lost pod."""
    meta, status = pod["metadata"], pod.get("status") or {}
    if status.get("phase") == "Failed":
        return Failure("", None, status.get("message") or status.get("reason") or "the predictor pod failed")
    for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        state, last = c.get("state") or {}, c.get("lastState") or {}
        terminated = state.get("terminated") or last.get("terminated")
        waiting = state.get("waiting") or {}
        is_init = c in (status.get("initContainerStatuses") or [])
        if terminated and (not is_init or terminated.get("exitCode") != 0) and "running" not in state:
            code = terminated.get("exitCode")
            tail = log_tail(ctx, meta["namespace"], meta["name"], c["name"])
            message = f"container {c['name']} exited with code {code}" + (f":\n{tail}" if tail else "")
            return Failure(c["name"], code, message)
        if waiting.get("reason") in ("CreateContainerConfigError", "CreateContainerError", "ContainerCannotRun"):
            return Failure(c["name"], None, f"container {c['name']}: {waiting['reason']}: {waiting.get('message', '')}")
    return None


def condition(
    type_: str, ok: bool, reason: str = "", message: str = "", old: Unstructured | None = None
) -> dict[str, Any]:
    value = "True" if ok else "False"
    stamp = old["lastTransitionTime"] if old and old.get("status") == value else now_timestamp()
    out: dict[str, Any] = {"type": type_, "status": value, "lastTransitionTime": stamp}
    if not ok and reason:
        out["reason"] = reason
    if not ok and message:
        out["message"] = message
    return out


class InferenceServiceController:
    name = "inferenceservices"
    sources = (For(ISVCS.key), Owns(PODS.key, owner=ISVCS.key, label=ISVC_LABEL))

    def __init__(self) -> None:
        self.work: WorkQueue[Key] = WorkQueue()
        self.ready: dict[str, bool] = {}  # pod uid -> readiness probe result
        self.probes: dict[str, asyncio.Task[None]] = {}  # pod uid -> probe loop
        self.serving: dict[Key, tuple[str, str, Backend]] = {}  # isvc -> (revision, pod uid, backend)
        self.draining: set[str] = set()  # pod uids being drained before deletion
        self.drains: set[asyncio.Task[None]] = set()

    async def run(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.store: Store = ctx.store
        self.network = shared_network(ctx.home)
        self.probe_interval = _float_env("AIRFLOW_TRAINING_PROBE_INTERVAL", 0.2)
        self.drain_timeout = _float_env("AIRFLOW_TRAINING_DRAIN_TIMEOUT", 60.0)
        self.ingress = Ingress(retry_for=_float_env("AIRFLOW_TRAINING_INGRESS_RETRY", 10.0))
        try:
            await runtime.run(self, ctx, self.work)
        finally:
            for task in [*self.probes.values(), *self.drains]:
                task.cancel()
            await self.ingress.close_all()

    def enqueue(self, namespace: str, name: str) -> None:
        self.work.add(ObjectRef(ISVCS.kind, namespace, name))

    # -- reconcile ---------------------------------------------------------------------------------
    async def reconcile(self, key: Key) -> None:
        namespace, name = key.namespace, key.name
        route_key = f"{namespace}/{name}"
        isvc = self.store.get(ISVCS.key, namespace, name)
        pods = self._pods(namespace, name, isvc)
        if isvc is None or isvc["metadata"].get("deletionTimestamp"):
            self.serving.pop(key, None)
            await self.ingress.close(route_key)
            for pod in pods:
                self._delete_pod(pod)
            return
        port = await self.ingress.open(route_key, _port_of((isvc.get("status") or {}).get("url")))
        url = f"http://127.0.0.1:{port}"
        try:
            predictor: Predictor | None = desired(isvc)
            spec_error = None
        except PredictorSpecError as exc:
            predictor, spec_error = None, exc
        latest = None
        if predictor is not None:
            latest = next((p for p in pods if p["metadata"]["name"] == predictor.revision), None)
            if latest is None:
                latest = self._create_pod(isvc, predictor)
        for pod in pods:
            self._ensure_probe(pod)
        latest_ready = latest is not None and self.ready.get(latest["metadata"]["uid"], False)
        if latest is not None and latest_ready:
            backend = Backend(latest["status"]["podIP"], _container_port(latest))
            self.serving[key] = (latest["metadata"]["name"], latest["metadata"]["uid"], backend)
        serving = self.serving.get(key)
        if serving is not None and not self.ready.get(serving[1], False):
            self.serving.pop(key)  # the serving predictor died or was deleted
            serving = None
        self.ingress.route(route_key, serving[2] if serving else None)
        if serving is not None and latest_ready:
            for pod in pods:
                if pod["metadata"]["uid"] != serving[1] and pod["metadata"]["uid"] not in self.draining:
                    self.draining.add(pod["metadata"]["uid"])
                    self.drains.add(asyncio.create_task(self._drain_and_delete(pod)))
        failure = failure_of(self.ctx, latest) if latest is not None and not latest_ready else None
        self._write_status(isvc, url, predictor, spec_error, latest, serving, failure)

    def _pods(self, namespace: str, name: str, isvc: Unstructured | None) -> list[Unstructured]:
        selector = [(ISVC_LABEL, name)]
        if isvc is None:  # deleted: every pod it left
            return self.store.list(PODS.key, namespace, label_equals=selector).items
        return self.store.list_controlled(PODS.key, isvc, label_equals=selector)

    def _create_pod(self, isvc: Unstructured, predictor: Predictor) -> Unstructured | None:
        namespace = isvc["metadata"]["namespace"]
        port = self.network.port(namespace, predictor.revision, "http1")
        try:
            pod = self.store.create(PODS.key, canonical.pod(build_pod(isvc, predictor, port)))
        except AlreadyExistsError:
            return self.store.get(PODS.key, namespace, predictor.revision)
        record_event(
            self.store,
            isvc,
            "Normal",
            "RevisionCreated",
            f"Created predictor pod {predictor.revision} for {predictor.storage_uri or 'its custom container'}",
            COMPONENT,
        )
        return pod

    def _delete_pod(self, pod: Unstructured) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(NotFoundError):
            self.store.delete(PODS.key, meta["namespace"], meta["name"], uid=meta["uid"])
        self.network.release_pod(meta["namespace"], meta["name"])

    async def _drain_and_delete(self, pod: Unstructured) -> None:
        uid = pod["metadata"]["uid"]
        try:
            if pod.get("status", {}).get("podIP"):
                backend = Backend(pod["status"]["podIP"], _container_port(pod))
                if not await self.ingress.drained(backend, self.drain_timeout):
                    log.warning(
                        "requests to %s still in flight after %ss; deleting it",
                        pod["metadata"]["name"],
                        self.drain_timeout,
                    )
            self._delete_pod(pod)
        finally:
            self.draining.discard(uid)
            task = asyncio.current_task()
            if task is not None:
                self.drains.discard(task)

    # -- readiness -------------------------------------------------------------------------------
    def _ensure_probe(self, pod: Unstructured) -> None:
        uid = pod["metadata"]["uid"]
        if uid not in self.probes:
            self.probes[uid] = asyncio.create_task(
                self._probe_loop(pod["metadata"]["namespace"], pod["metadata"]["name"], uid)
            )

    async def _probe_loop(self, namespace: str, name: str, uid: str) -> None:
        owner = ""
        try:
            while True:
                pod = self.store.get(PODS.key, namespace, name)
                if pod is None or pod["metadata"]["uid"] != uid:
                    break
                owner = (pod["metadata"].get("labels") or {}).get(ISVC_LABEL, "")
                ok = await self._probe(pod)
                if ok != self.ready.get(uid, False):
                    self.ready[uid] = ok
                    self.enqueue(namespace, owner)
                await asyncio.sleep(self.probe_interval if not ok else max(self.probe_interval, 1.0))
        finally:
            self.probes.pop(uid, None)
            if self.ready.pop(uid, False) and owner:
                self.enqueue(namespace, owner)

    async def _probe(self, pod: Unstructured) -> bool:
        status = pod.get("status") or {}
        container = next(
            (c for c in status.get("containerStatuses") or [] if c.get("name") == _serving_name(pod)), None
        )
        if status.get("phase") != "Running" or not status.get("podIP") or not container:
            return False
        if "running" not in (container.get("state") or {}):
            return False
        host, port = status["podIP"], _container_port(pod)
        path = _probe_path(pod)
        try:
            if path is None:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
                writer.close()
                return True
            async with self.ingress.session.get(f"http://{host}:{port}{path}", timeout=ClientTimeout(total=1.0)) as r:
                return 200 <= r.status < 400
        except (OSError, ClientError, asyncio.TimeoutError):
            return False

    # -- status ----------------------------------------------------------------------------------
    def _write_status(
        self,
        isvc: Unstructured,
        url: str,
        predictor: Predictor | None,
        spec_error: PredictorSpecError | None,
        latest: Unstructured | None,
        serving: tuple[str, str, Backend] | None,
        failure: Failure | None,
    ) -> None:
        old_status = isvc.get("status") or {}
        old = {c.get("type"): c for c in old_status.get("conditions") or []}
        latest_name = latest["metadata"]["name"] if latest else None
        latest_ready = serving is not None and serving[0] == latest_name
        if spec_error is not None:
            reason, message = spec_error.reason, spec_error.message
        elif failure is not None:
            reason, message = "ModelLoadFailed", f"predictor {latest_name}: {failure.message}"
        elif not latest_ready:
            reason, message = "Progressing", f"predictor {latest_name} is not ready yet ({_progress(latest)})"
        else:
            reason = message = ""
        conditions = [
            condition("IngressReady", True, old=old.get("IngressReady")),
            condition("LatestDeploymentReady", latest_ready, reason, message, old.get("LatestDeploymentReady")),
            condition(
                "PredictorReady",
                serving is not None,
                reason,
                message,
                old.get("PredictorReady"),
            ),
            condition("Ready", serving is not None, reason, message, old.get("Ready")),
        ]
        predictor_status: dict[str, Any] = {"url": url}
        if latest_name:
            predictor_status["latestCreatedRevision"] = latest_name
        if serving is not None:
            predictor_status["latestReadyRevision"] = serving[0]
            predictor_status["traffic"] = [
                {"revisionName": serving[0], "percent": 100, "latestRevision": serving[0] == latest_name}
            ]
        if spec_error is not None:
            transition = "InvalidSpec"
        elif failure is not None:
            transition = "BlockedByFailedLoad"
        elif latest_ready:
            transition = "UpToDate"
        else:
            transition = "InProgress"
        model_status: dict[str, Any] = {
            "transitionStatus": transition,
            "states": {
                "activeModelState": "Loaded" if serving is not None else ("FailedToLoad" if failure else "Pending"),
                "targetModelState": (
                    "FailedToLoad" if failure or spec_error else ("Loaded" if latest_ready else "Loading")
                ),
            },
            "copies": {"failedCopies": 1 if failure else 0, "totalCopies": 1},
        }
        previous_failure = (old_status.get("modelStatus") or {}).get("lastFailureInfo")
        if failure is not None or spec_error is not None:
            info: dict[str, Any] = {
                "reason": reason,
                "message": message,
                "time": (previous_failure or {}).get("time")
                if previous_failure and previous_failure.get("message") == message
                else now_timestamp(),
            }
            if failure is not None and failure.exit_code is not None:
                info["exitCode"] = failure.exit_code
            model_status["lastFailureInfo"] = info
        status = {
            "url": url,
            "address": {"url": url},
            "observedGeneration": isvc["metadata"].get("generation", 1),
            "conditions": sorted(conditions, key=lambda c: str(c["type"])),
            "components": {"predictor": predictor_status},
            "modelStatus": model_status,
            "deploymentMode": "RawDeployment",
        }
        if predictor is not None and predictor.storage_uri:
            status["storageUri"] = predictor.storage_uri
        if json.dumps(status, sort_keys=True) == json.dumps(old_status, sort_keys=True):
            return
        current = self.store.get(ISVCS.key, isvc["metadata"]["namespace"], isvc["metadata"]["name"])
        if current is None or current["metadata"]["uid"] != isvc["metadata"]["uid"]:
            return
        if (
            failure is not None
            and (old_status.get("modelStatus") or {}).get("lastFailureInfo", {}).get("message") != message
        ):
            record_event(self.store, current, "Warning", "ModelLoadFailed", message, COMPONENT)
        if latest_ready and (old.get("LatestDeploymentReady") or {}).get("status") != "True":
            record_event(self.store, current, "Normal", "RevisionReady", f"{latest_name} serves {url}", COMPONENT)
        current["status"] = status
        self.store.update(ISVCS.key, current)  # (just read: a Conflict runs the pass again)


def _port_of(url: str | None) -> int:
    with contextlib.suppress(ValueError, TypeError):
        return int(urlsplit(url or "").port or 0)
    return 0


def _serving_name(pod: Unstructured) -> str:
    containers = pod.get("spec", {}).get("containers") or [{}]
    return str(containers[0].get("name") or PREDICTOR_CONTAINER)


def _container_port(pod: Unstructured) -> int:
    container = (pod.get("spec", {}).get("containers") or [{}])[0]
    return int(((container.get("ports") or [{}])[0]).get("containerPort") or 8080)


def _probe_path(pod: Unstructured) -> str | None:
    container = (pod.get("spec", {}).get("containers") or [{}])[0]
    path = ((container.get("readinessProbe") or {}).get("httpGet") or {}).get("path")
    return str(path) if path else None


def _progress(pod: Unstructured | None) -> str:
    if pod is None:
        return "no pod"
    status = pod.get("status") or {}
    for c in status.get("initContainerStatuses") or []:
        if "running" in (c.get("state") or {}):
            return f"{c['name']} is running"
    phase = status.get("phase") or "Pending"
    return "waiting for the readiness probe" if phase == "Running" else f"pod is {phase}"
