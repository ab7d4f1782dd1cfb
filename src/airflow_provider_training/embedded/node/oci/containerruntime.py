"""The OCI runtime as the node agent sees it: which pods run as images, their images pulled in the
background with the kubelet's policy, back-off, status reasons and events, and the pod spec turned
into runc bundles.

Which runtime a pod gets: its annotation ``training.airflow.apache.org/runtime`` (``oci`` or
``process``), else the node's ``$AIRFLOW_TRAINING_RUNTIME`` (``[training] embedded_runtime`` of the
Airflow tasks that start the control plane), else ``process``. Image mode needs Linux, root and
``runc`` (``$AIRFLOW_TRAINING_RUNC``, else on PATH): where one is missing the node says so once and
runs pods as processes, and a pod that asks for ``oci`` itself gets ``CreateContainerError`` naming
what is missing.

A pull runs on a worker thread; the pod waits in ``ContainerCreating`` and its key is queued again
when the pull ends. Events and reasons are the kubelet's: ``Pulling``, ``Pulled`` (size and time, or
"already present on machine"), ``Failed`` with ``ErrImagePull`` and the registry's answer, then
``BackOff`` / ``ImagePullBackOff`` until the next try (10 s doubling to 300 s, or
``AIRFLOW_TRAINING_IMAGE_PULL_BACKOFF`` / ``…_MAX``); ``ErrImageNeverPull`` for ``Never``;
``InvalidImageName``. Pull credentials come from the pod's ``imagePullSecrets``
(``kubernetes.io/dockerconfigjson`` or ``kubernetes.io/dockercfg`` Secrets of its namespace).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded.node.oci import bundle, references
from airflow_provider_training.embedded.node.oci.imageconfig import ImageConfig
from airflow_provider_training.embedded.node.oci.imagestore import ImageStore, PullError, PullResult
from airflow_provider_training.embedded.node.podspec import BUILTIN_INIT, PodConfigError
from airflow_provider_training.kitops.credentials import Credential
from airflow_provider_training.specs.kitfile.reference import ReferenceError
from airflow_provider_training.specs.unstructured import Unstructured

log = logging.getLogger(__name__)
RUNTIME_ANNOTATION = "training.airflow.apache.org/runtime"
RUNTIME_ENV = "AIRFLOW_TRAINING_RUNTIME"
OCI, PROCESS = "oci", "process"
BACKOFF_ENV, BACKOFF_MAX_ENV = "AIRFLOW_TRAINING_IMAGE_PULL_BACKOFF", "AIRFLOW_TRAINING_IMAGE_PULL_BACKOFF_MAX"
Event = Callable[[Unstructured, str, str, str], None]


class PullPending(Exception):
    """The pod's images are being pulled: it waits in ContainerCreating and comes back when done."""


@dataclass
class _Pull:
    """One image of one pod: its pull in progress, its last result, its back-off."""

    source: references.Source
    policy: str
    future: Future[PullResult] | None = None
    result: PullResult | None = None
    error: str = ""
    failures: int = 0
    retry_at: float = 0.0
    reported: set[str] = field(default_factory=set)


def unavailable_reason() -> str | None:
    """Why image mode cannot run here, or None."""
    if not hasattr(os, "unshare") and not Path("/proc/self/ns/mnt").exists():
        return "image mode needs Linux namespaces"
    if os.geteuid() != 0:
        return "image mode needs the node to run as root (runc, mount and PID namespaces)"
    if bundle.runc_path() is None:
        where = os.environ.get(bundle.RUNC_ENV) or "runc on PATH"
        return f"image mode needs runc, and {where} was not found (Debian: apt-get install runc)"
    return None


def pull_policy(container: dict[str, Any], ref: references.Reference) -> str:
    """``imagePullPolicy``, defaulted as the API server does (Always for ``latest`` or no tag)."""
    policy = str(container.get("imagePullPolicy") or "")
    if policy in ("Always", "IfNotPresent", "Never"):
        return policy
    return "Always" if (ref.tag in ("", "latest") and not ref.digest) else "IfNotPresent"


def backoff_settings() -> tuple[float, float]:
    return float(os.environ.get(BACKOFF_ENV, "10")), float(os.environ.get(BACKOFF_MAX_ENV, "300"))


class OciRuntime:
    def __init__(self, home_root: Path, node_dir: Path, wake: Callable[[str], None], event: Event) -> None:
        """``wake(uid)``: queue the pod again (called from a pull's thread); ``event``: record an event."""
        self.home_root = home_root
        self.node_dir = node_dir
        self.wake = wake
        self.event = event
        self.default = (os.environ.get(RUNTIME_ENV) or PROCESS).strip().lower()
        if self.default not in (OCI, PROCESS):
            log.warning("%s=%r is neither oci nor process; pods run as processes", RUNTIME_ENV, self.default)
            self.default = PROCESS
        self.unavailable = unavailable_reason()
        if self.default == OCI and self.unavailable:
            log.warning("node agent: embedded_runtime is oci, but %s; pods run as processes", self.unavailable)
        self.runc = bundle.runc_path() or ""
        self._store: ImageStore | None = None
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="image-pull")
        self.pulls: dict[str, dict[str, _Pull]] = {}  # pod uid -> container image -> its pull
        self.inflight: dict[tuple[str, str], Future[PullResult]] = {}  # one pull per (image, credentials)
        self.lock = threading.Lock()
        self.initial, self.maximum = backoff_settings()

    @property
    def store(self) -> ImageStore:
        if self._store is None:
            self._store = ImageStore(self.node_dir / "oci")
        return self._store

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- which runtime ----------------------------------------------------------------------------
    def wants(self, pod: Unstructured) -> bool:
        """Whether ``pod`` runs as images (PodConfigError when it asks for that and this node cannot)."""
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        asked = str(annotations.get(RUNTIME_ANNOTATION) or "").strip().lower()
        if asked and asked not in (OCI, PROCESS):
            raise PodConfigError(
                "CreateContainerError",
                f"annotation {RUNTIME_ANNOTATION}={asked!r}: the embedded node runs pods as 'oci' (images, with runc) "
                "or 'process'",
            )
        if asked == OCI and self.unavailable:
            raise PodConfigError(
                "CreateContainerError", f"{self.unavailable}; the pod asks for it ({RUNTIME_ANNOTATION}: oci)"
            )
        chosen = asked or self.default
        return chosen == OCI and self.unavailable is None

    def forget(self, uid: str) -> None:
        self.pulls.pop(uid, None)

    # -- images -------------------------------------------------------------------------------------
    def images_for(
        self, pod: Unstructured, secret: Callable[[str, str], Unstructured | None]
    ) -> dict[str, ImageConfig]:
        """Every container's image, present: the images by container name, PullPending while a pull
        runs, or PodConfigError with the kubelet's reason (ErrImagePull, ImagePullBackOff, …)."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid = str(meta["uid"])
        try:
            table = references.load_table(references.table_path(self.home_root))
        except references.ImageTableError as exc:
            raise PodConfigError("CreateContainerConfigError", str(exc)) from None
        pulls = self.pulls.setdefault(uid, {})
        out: dict[str, ImageConfig] = {}
        pending = False
        containers = [c for c in (spec.get("initContainers") or []) if c.get("name") not in BUILTIN_INIT]
        containers += list(spec.get("containers") or [])
        for container in containers:
            image = str(container.get("image") or "")
            try:
                source = references.resolve(image, table)
            except ReferenceError as exc:
                raise PodConfigError(
                    "InvalidImageName", f'Failed to apply default image tag "{image}": {exc}'
                ) from None
            pull = pulls.get(image)
            if pull is None:
                pull = pulls[image] = _Pull(source, pull_policy(container, source.ref))
            result = self._ready(pod, pull, secret)
            if result is None:
                pending = True
                continue
            out[str(container["name"])] = ImageConfig(result.image, source)
        if pending:
            raise PullPending()
        return out

    def _ready(
        self, pod: Unstructured, pull: _Pull, secret: Callable[[str, str], Unstructured | None]
    ) -> PullResult | None:
        """This pull's result, or None while it runs (started here when due)."""
        image = pull.source.image
        if pull.result is not None:
            return pull.result
        if pull.future is not None:
            if not pull.future.done():
                return None
            future, pull.future = pull.future, None
            try:
                pull.result = future.result()
            except PullError as exc:
                pull.failures += 1
                pull.error = f'failed to pull and unpack image "{pull.source.pulled}": {exc}'
                pull.retry_at = time.monotonic() + min(self.initial * 2 ** (pull.failures - 1), self.maximum)
                self._once(pod, pull, "Warning", "Failed", f'Failed to pull image "{image}": {pull.error}')
                raise PodConfigError("ErrImagePull", pull.error) from None
            result = pull.result
            took = f"{result.seconds:.3f}s"
            self.event(
                pod,
                "Normal",
                "Pulled",
                f'Successfully pulled image "{image}" in {took} ({took} including waiting). Image size: {result.image.size} bytes.',
            )
            return result
        if pull.error and time.monotonic() < pull.retry_at:
            self._once(pod, pull, "Normal", "BackOff", f'Back-off pulling image "{image}"')
            raise PodConfigError("ImagePullBackOff", f'Back-off pulling image "{image}": {pull.error}')
        if pull.policy != "Always":
            present = self.store.lookup(pull.source.pulled)
            if present is not None:
                pull.result = PullResult(present, 0, 0.0)
                self.event(pod, "Normal", "Pulled", f'Container image "{image}" already present on machine')
                return pull.result
            if pull.policy == "Never":
                message = f'Container image "{image}" is not present with pull policy of Never'
                self._once(pod, pull, "Warning", "ErrImageNeverPull", message)
                raise PodConfigError("ErrImageNeverPull", message)
        try:
            credential = self._credential(pod, pull.source.ref.registry, secret)
        except PodConfigError:
            raise
        pull.reported.discard("BackOff")
        self.event(pod, "Normal", "Pulling", f'Pulling image "{image}"')
        pull.future = self._submit(pull.source, credential, str(pod["metadata"]["uid"]))
        return None

    def _once(self, pod: Unstructured, pull: _Pull, type_: str, reason: str, message: str) -> None:
        key = f"{reason}:{message}:{pull.failures}"
        if key not in pull.reported:
            pull.reported.add(key)
            self.event(pod, type_, reason, message)

    def _submit(self, source: references.Source, credential: Credential | None, uid: str) -> Future[PullResult]:
        key = (source.pulled, _credential_key(credential))
        with self.lock:
            future = self.inflight.get(key)
            if future is None:
                future = self.pool.submit(self.store.pull, source, credential)
                self.inflight[key] = future
                future.add_done_callback(functools.partial(self._done, key))
        future.add_done_callback(lambda _f: self.wake(uid))
        return future

    def _done(self, key: tuple[str, str], _future: object = None) -> None:
        with self.lock:
            self.inflight.pop(key, None)

    def _credential(
        self, pod: Unstructured, registry: str, secret: Callable[[str, str], Unstructured | None]
    ) -> Credential | None:
        """The first ``imagePullSecrets`` entry with credentials for ``registry`` (missing secrets
        are skipped, as the kubelet does, with a warning event)."""
        namespace = pod["metadata"]["namespace"]
        for ref in (pod.get("spec") or {}).get("imagePullSecrets") or []:
            name = str((ref or {}).get("name") or "")
            obj = secret(namespace, name) if name else None
            if obj is None:
                self.event(
                    pod,
                    "Warning",
                    "FailedToRetrieveImagePullSecret",
                    f"Unable to retrieve some image pull secrets ({name}); attempting to pull the image may not succeed.",
                )
                continue
            found = docker_config_credential(obj, registry)
            if found is not None:
                return found
        return None

    # -- bundles --------------------------------------------------------------------------------------
    def finish(self, spec: dict[str, Any], pod: Unstructured, images: dict[str, ImageConfig], pod_dir: Path) -> None:
        """Turn ``podspec.build``'s spec into one that runs each container's bundle."""
        spec["isolation"] = OCI  # no view of the supervisor's own: each container has its root
        spec["runtime"] = OCI
        for key in ("initContainers", "containers"):
            done = []
            for container in spec[key]:
                if container.get("builtin"):
                    done.append(container)
                    continue
                container["podIP"] = spec.get("podIP", "")
                if container.get("memoryLimit"):
                    spec.setdefault("warnings", []).append(
                        f"the memory limit of container {container['name']} (image mode runs runc without cgroup limits)"
                    )
                try:
                    done.append(
                        bundle.write(container, images[container["name"]], pod, pod_dir, self.node_dir, self.runc)
                    )
                except (OSError, ValueError) as exc:
                    raise PodConfigError(
                        "CreateContainerError", f"cannot create the container {container['name']}: {exc}"
                    ) from None
            spec[key] = done


def docker_config_credential(secret: Unstructured, registry: str) -> Credential | None:
    """Credentials for ``registry`` in a ``kubernetes.io/dockerconfigjson`` (or ``dockercfg``) Secret."""
    data = dict(secret.get("data") or {})
    text = ""
    for key in (".dockerconfigjson", ".dockercfg"):
        if key in data:
            try:
                text = base64.b64decode(str(data[key]), validate=True).decode()
            except (binascii.Error, ValueError):
                return None
            break
        if key in (secret.get("stringData") or {}):
            text = str(secret["stringData"][key])
            break
    if not text:
        return None
    try:
        config = json.loads(text)
    except (ValueError, RecursionError):  # (a hostile secret nests deeper than the parser recurses)
        return None
    auths = config.get("auths", config) if isinstance(config, dict) else {}
    if not isinstance(auths, dict):
        return None
    for host, entry in auths.items():
        bare = str(host).removeprefix("https://").removeprefix("http://").split("/", 1)[0]
        if bare != registry and not (registry == references.DOCKER_HUB and "docker.io" in bare):
            continue
        if not isinstance(entry, dict):
            continue
        user, password = str(entry.get("username") or ""), str(entry.get("password") or "")
        if entry.get("auth"):
            try:
                user, _, password = base64.b64decode(str(entry["auth"])).decode().partition(":")
            except (binascii.Error, ValueError, UnicodeDecodeError):
                continue
        credential = Credential(user, password, str(entry.get("identitytoken") or ""))
        if not credential.empty:
            return credential
    return None


def _credential_key(credential: Credential | None) -> str:
    if credential is None:
        return ""
    return hashlib.sha256(
        f"{credential.username}\0{credential.password}\0{credential.identity_token}".encode()
    ).hexdigest()
