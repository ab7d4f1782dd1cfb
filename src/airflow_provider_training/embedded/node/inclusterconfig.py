"""In-cluster configuration for containers, as the kubelet provides it: the projected
``kube-api-access-*`` volume (the pod's service-account token, the control plane's ``ca.crt``, the
pod's ``namespace``) and ``KUBERNETES_SERVICE_HOST`` / ``KUBERNETES_SERVICE_PORT``, so kubectl and
the official clients inside a replica find the API with no flags.

The address is the one the control plane serves on (127.0.0.1 and its port, which its certificate
names); pods reach it over loopback like everything else. A projected volume is written once at
pod start (sources: ``serviceAccountToken``, ``configMap``, ``secret``, ``downwardAPI``); the
``kube-root-ca.crt`` ConfigMap a cluster publishes in every namespace is served from the CA file
when no such object is stored.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from airflow_provider_training.embedded import serviceaccount
from airflow_provider_training.embedded.node import isolation
from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.store import Store
from airflow_provider_training.specs.unstructured import Unstructured

TOKEN_SECONDS = 3600  # a projection's expirationSeconds when it names none (the API's default)


@functools.cache
def _server(kubeconfig: Path) -> tuple[str, int] | None:
    with contextlib.suppress(OSError, ValueError, KeyError, IndexError, TypeError, yaml.YAMLError):
        url = urlsplit(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])
        if url.hostname and url.port:
            return url.hostname, url.port
    return None


def service_env(home: Home) -> dict[str, str]:
    """The ``kubernetes`` Service's variables the kubelet gives every container."""
    server = _server(home.kubeconfig)
    if server is None:
        return {}
    host, port = server
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": str(port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(port),
        "KUBERNETES_PORT": f"tcp://{host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP": f"tcp://{host}:{port}",
        f"KUBERNETES_PORT_{port}_TCP_PROTO": "tcp",
        f"KUBERNETES_PORT_{port}_TCP_PORT": str(port),
        f"KUBERNETES_PORT_{port}_TCP_ADDR": host,
    }


def _field(pod: Unstructured, path: str) -> str:
    meta = pod.get("metadata") or {}
    if path.startswith(("metadata.labels", "metadata.annotations")):
        table = meta.get("labels" if "labels" in path else "annotations") or {}
        if "['" in path:
            return str(table.get(path.split("['", 1)[1].rstrip("']"), ""))
        return "\n".join(f'{k}="{v}"' for k, v in sorted(table.items()))
    simple = {"metadata.name": "name", "metadata.namespace": "namespace", "metadata.uid": "uid"}
    return str(meta.get(simple.get(path, ""), "")) if path in simple else ""


def _write(directory: Path, rel: str, data: bytes, mode: int) -> None:
    path = directory / rel
    if "/" in rel:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # A new file is written in place: no container reads it before its pod starts, and a pod's
        # start writes three of these (a third of a start's time on a slow disk went to renames).
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), mode)
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.chmod(mode)
    os.replace(tmp, path)


def _object_data(store: Store, home: Home, kind: str, namespace: str, name: str) -> dict[str, bytes] | None:
    obj = store.get(f"core/{kind}s", namespace, name)
    if obj is None:
        if kind == "configmap" and name == serviceaccount.ROOT_CA_CONFIGMAP:
            return {"ca.crt": (home.root / "tls" / "ca.crt").read_bytes()}
        return None
    if kind == "secret":
        return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
    out = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
    out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    return out


def _token(store: Store, home: Home, pod: Unstructured, projection: dict[str, Any]) -> str:
    """The pod's token for a ``serviceAccountToken`` projection. Without an ``audience`` it is the
    API server's (valid while the pod lives); with one (Trainer's status token) it is for that
    audience only and expires after ``expirationSeconds`` (default 3600), as the kubelet's."""
    meta = pod["metadata"]
    account_name = serviceaccount.account_of(pod)
    account = store.get(serviceaccount.ACCOUNTS_KEY, meta["namespace"], account_name)
    uid = str((account or {}).get("metadata", {}).get("uid", ""))
    audience = projection.get("audience")
    if not audience or audience == serviceaccount.ISSUER:
        return serviceaccount.mint(home.root, pod, uid)
    seconds = int(projection.get("expirationSeconds") or TOKEN_SECONDS)
    return serviceaccount.mint_request(
        home.root,
        meta["namespace"],
        account_name,
        uid,
        [str(audience)],
        int(time.time()) + seconds,
        (meta["name"], meta["uid"]),
    )


def refresh_tokens(store: Store, home: Home, pod: Unstructured, volumes_dir: Path, now: float) -> int:
    """Tokens that expire are written again once 80 % of their life has passed, as the kubelet
    rotates them; returns how many were written."""
    written = 0
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        for source in (volume.get("projected") or {}).get("sources") or []:
            token = source.get("serviceAccountToken") or {}
            if not token.get("audience") or token.get("audience") == serviceaccount.ISSUER:
                continue
            path = volumes_dir / str(volume.get("name")) / str(token.get("path", "token"))
            try:
                age = now - path.stat().st_mtime
            except OSError:
                continue
            if age >= 0.8 * int(token.get("expirationSeconds") or TOKEN_SECONDS):
                before = path.stat()
                _write(path.parent, path.name, _token(store, home, pod, token).encode(), before.st_mode & 0o777)
                if os.geteuid() == 0:  # the owner the pod's fsGroup / runAsUser gave it
                    os.chown(path, before.st_uid, before.st_gid, follow_symlinks=False)
                written += 1
    return written


class ProjectionError(Exception):
    pass


def write_projected(
    store: Store,
    home: Home,
    pod: Unstructured,
    volume: dict[str, Any],
    directory: Path,
    fs_user: int | None = None,
    fs_group: int | None = None,
) -> None:
    """Write the projected volume's files. As the kubelet's: the token is ``defaultMode`` unless the
    pod has an fsGroup or one runAsUser for all its containers (``fs_user``): then 0600, owned by
    that user (the fsGroup's read access is added with the rest of the volume's ownership)."""
    spec = volume.get("projected") or {}
    default_mode = int(spec.get("defaultMode", 0o644))
    namespace = pod["metadata"]["namespace"]
    directory.mkdir(parents=True, exist_ok=True)
    for source in spec.get("sources") or []:
        if "serviceAccountToken" in source:
            token = source["serviceAccountToken"]
            path = token.get("path", "token")
            mode = 0o600 if fs_user is not None or fs_group is not None else default_mode
            _write(directory, path, _token(store, home, pod, token).encode(), mode)
            if fs_user is not None and os.geteuid() == 0:
                os.chown(directory / path, fs_user, -1, follow_symlinks=False)
        elif "configMap" in source or "secret" in source:
            kind = "configmap" if "configMap" in source else "secret"
            ref = source.get("configMap") or source.get("secret") or {}
            data = _object_data(store, home, kind, namespace, ref.get("name", ""))
            if data is None:
                if ref.get("optional"):
                    continue
                raise ProjectionError(f'{kind} "{ref.get("name")}" not found')
            items = ref.get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                if item["key"] in data:
                    _write(
                        directory, item.get("path", item["key"]), data[item["key"]], int(item.get("mode", default_mode))
                    )
        elif "downwardAPI" in source:
            for item in source["downwardAPI"].get("items") or []:
                field_path = (item.get("fieldRef") or {}).get("fieldPath", "")
                _write(directory, item["path"], _field(pod, field_path).encode(), int(item.get("mode", default_mode)))


SECRETS_ROOT = "/var/run/secrets/"


def mountable(mount: isolation.Mount, mode: str) -> bool:
    """The per-pod token mounts (the service account's, Trainer's status token under
    ``/var/run/secrets/kubeflow/trainer``) need a mount namespace: in the ``links`` fallback every pod
    would fight over one host symlink at that path, so there they are left out (clients there need a
    kubeconfig; the Kubeflow SDK's status reports return False)."""
    return mode != isolation.LINKS or not (mount.target + "/").startswith(SECRETS_ROOT)
