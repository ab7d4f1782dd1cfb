"""Cluster-mode packaging: the ``batch/v1`` Job (and its credentials Secret) that packs a directory of a
PersistentVolumeClaim and pushes it with the ``kit`` CLI, and the reading of what that Job printed.

The seed's ``package-job.yaml``, made safe: the claim is mounted read-only, the registry password
reaches the container only as an environment variable from a Secret (``secretKeyRef``) and reaches
``kit`` only on stdin (``printf`` is a shell builtin, so it is on no process's argv), and the Job's
spec carries no credential. Non-secret values (reference, paths) are passed as environment
variables, so the script never needs shell quoting of user input.

Pure functions over dicts; the airflow layer creates the objects and waits.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# A pinned release of KitOps' CLI image (entrypoint ``kit``, Alpine with ``sh``); override per task
# or with ``[training] kit_image``.
KIT_IMAGE = "ghcr.io/kitops-ml/kitops:v1.16.0"
SOURCE_MOUNT = "/modelkit-source"
KITOPS_HOME_MOUNT = "/kitops-home"
CONTAINER = "kit"
USER_KEY, PASSWORD_KEY = "KIT_USER", "KIT_PASSWORD"  # same keys as the deploy operator's Secret
INSPECT_BEGIN = "--- modelkit inspect begin ---"
INSPECT_END = "--- modelkit inspect end ---"
_PUSHED = re.compile(r"Pushed (sha256:[0-9a-f]{64})")
MANAGED_BY = {"app.kubernetes.io/managed-by": "airflow-provider-training"}


@dataclass(frozen=True)
class PackageJob:
    """What one packaging Job does. ``path`` is the directory inside the claim ('' = its root);
    ``kitfile`` is Kitfile YAML text (sent on stdin) or a path inside the claim, or None (the
    directory's own Kitfile)."""

    name: str
    namespace: str
    claim: str
    path: str
    reference: str
    registry: str
    image: str = KIT_IMAGE
    kitfile: str | None = None
    compression: str = "none"
    modelpack: bool = False  # kit's --use-model-pack
    layer_format: str = "tar"
    plain_http: bool = False
    tls_verify: bool = True
    secret: str | None = None  # Secret with KIT_USER / KIT_PASSWORD; None = anonymous push
    backoff_limit: int = 0
    active_deadline_seconds: int | None = None
    labels: dict[str, str] | None = None

    @property
    def source(self) -> str:
        return f"{SOURCE_MOUNT}/{self.path}".rstrip("/") if self.path else SOURCE_MOUNT

    @property
    def kitfile_is_text(self) -> bool:
        return self.kitfile is not None and "\n" in self.kitfile


def network_flags(job: PackageJob) -> str:
    flags = []
    if job.plain_http:
        flags.append("--plain-http")
    if not job.tls_verify:
        flags.append("--tls-verify=false")
    return " ".join(flags)


def script(job: PackageJob) -> str:
    """The container's ``sh -c`` script; every user-given value comes from the environment."""
    net = network_flags(job)
    net = f" {net}" if net else ""
    lines = [
        "set -eu",
        'if [ ! -d "$MODELKIT_SOURCE" ]; then',
        f'  echo "Error: $MODELKIT_SOURCE does not exist in PersistentVolumeClaim {job.claim}" >&2; exit 2',
        "fi",
    ]
    if job.secret:
        lines.append(
            f'printf \'%s\\n\' "${PASSWORD_KEY}" | kit login "$MODELKIT_REGISTRY" -u "${USER_KEY}" --password-stdin{net}'
        )
    pack = 'kit pack "$MODELKIT_SOURCE" -t "$MODELKIT_REFERENCE"'
    if job.compression != "none":
        pack += f" --compression {job.compression}"
    if job.modelpack:
        pack += " --use-model-pack"
    if job.layer_format != "tar":
        pack += f" --layer-format {job.layer_format}"
    if job.kitfile_is_text:
        lines.append(f"printf '%s' \"$MODELKIT_KITFILE\" | {pack} -f -")
    elif job.kitfile:
        lines.append(f'{pack} -f "$MODELKIT_KITFILE"')
    else:
        lines.append(pack)
    lines += [
        f'kit push "$MODELKIT_REFERENCE"{net}',
        f"echo '{INSPECT_BEGIN}'",
        'kit inspect "$MODELKIT_REFERENCE"',
        f"echo '{INSPECT_END}'",
    ]
    return "\n".join(lines) + "\n"


def manifest(job: PackageJob) -> dict[str, Any]:
    """The ``batch/v1`` Job."""
    env: list[dict[str, Any]] = [
        {"name": "MODELKIT_SOURCE", "value": job.source},
        {"name": "MODELKIT_REFERENCE", "value": job.reference},
        {"name": "MODELKIT_REGISTRY", "value": job.registry},
        {"name": "KITOPS_HOME", "value": KITOPS_HOME_MOUNT},
    ]
    if job.kitfile is not None:
        value = job.kitfile if job.kitfile_is_text else _in_claim(job.kitfile)
        env.append({"name": "MODELKIT_KITFILE", "value": value})
    if job.secret:
        env += [
            {"name": key, "valueFrom": {"secretKeyRef": {"name": job.secret, "key": key}}}
            for key in (USER_KEY, PASSWORD_KEY)
        ]
    spec: dict[str, Any] = {
        "backoffLimit": job.backoff_limit,
        "template": {
            "metadata": {"labels": {**MANAGED_BY, **(job.labels or {})}},
            "spec": {
                "restartPolicy": "Never",
                # it never calls the Kubernetes API: no service-account token next to registry credentials
                "automountServiceAccountToken": False,
                "containers": [
                    {
                        "name": CONTAINER,
                        "image": job.image,
                        "command": ["/bin/sh", "-c", script(job)],
                        "env": env,
                        "volumeMounts": [
                            {"name": "source", "mountPath": SOURCE_MOUNT, "readOnly": True},
                            {"name": "kitops-home", "mountPath": KITOPS_HOME_MOUNT},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "source", "persistentVolumeClaim": {"claimName": job.claim, "readOnly": True}},
                    {"name": "kitops-home", "emptyDir": {}},
                ],
            },
        },
    }
    if job.active_deadline_seconds:
        spec["activeDeadlineSeconds"] = job.active_deadline_seconds
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job.name, "namespace": job.namespace, "labels": {**MANAGED_BY, **(job.labels or {})}},
        "spec": spec,
    }


def _in_claim(path: str) -> str:
    return path if path.startswith("/") else f"{SOURCE_MOUNT}/{path}"


def secret(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    """The Secret the Job's ``kit login`` reads ``KIT_USER`` / ``KIT_PASSWORD`` from."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "stringData": dict(data),
    }


@dataclass(frozen=True)
class PackageOutput:
    digest: str
    manifest: dict[str, Any] | None

    @property
    def size(self) -> int | None:
        """Manifest + config + layers, as the local push reports it. The manifest's byte length is
        that of its compact JSON (how kit writes it)."""
        if self.manifest is None:
            return None
        blobs = [self.manifest["config"], *(self.manifest.get("layers") or [])]
        raw = json.dumps(self.manifest, separators=(",", ":"), ensure_ascii=False).encode()
        return len(raw) + sum(int(b["size"]) for b in blobs)


class PackageLogError(ValueError):
    pass


def parse_log(text: str) -> PackageOutput:
    """The pushed digest (kit's ``Pushed <digest>`` line) and the manifest from the ``kit inspect``
    block. Lines kit logs around the JSON (update notices) are skipped."""
    pushed = _PUSHED.findall(text)
    inspected: dict[str, Any] | None = None
    if INSPECT_BEGIN in text:
        block = text.split(INSPECT_BEGIN, 1)[1].split(INSPECT_END, 1)[0]
        start = block.find("{")
        if start >= 0:
            try:
                inspected, _ = json.JSONDecoder().raw_decode(block[start:])
            except ValueError:
                inspected = None
    digest = pushed[-1] if pushed else (inspected or {}).get("digest")
    if not digest:
        raise PackageLogError("the packaging Job's log has no 'Pushed sha256:…' line and no kit inspect output")
    if inspected and inspected.get("digest") not in (None, digest):
        raise PackageLogError(f"kit pushed {digest} but inspect reports {inspected.get('digest')}")
    return PackageOutput(str(digest), (inspected or {}).get("manifest"))
