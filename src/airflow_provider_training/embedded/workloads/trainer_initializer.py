"""Kubeflow Trainer's dataset and model initializers on the embedded control plane.

``python -m airflow_provider_training.embedded.workloads.trainer_initializer dataset|model``

Upstream's images (``ghcr.io/kubeflow/trainer/{dataset,model}-initializer``) read ``STORAGE_URI``
and download into ``/workspace/dataset`` / ``/workspace/model`` on the shared ``initializer``
volume. This runs in their place (the TrainJob controller gives those images this command) and
understands what a laptop has:

- ``kit://<registry>/<repository>:<tag>`` — pull the ModelKit and unpack it (the KServe storage
  initializer's code: ``KIT_USER`` / ``KIT_PASSWORD``, ``KIT_UNPACK_FLAGS``, ``KIT_CA_CERT``);
- ``pvc://<claim>/<path>`` — copy from the claim's directory on this machine;
- ``file:///abs/path`` or an absolute path — copy that file or directory.

``hf://`` and ``s3://`` are refused by the controller before anything runs (a clear ``Failed``
reason, not a crash loop); if one reaches this program anyway it exits 2 with the same words.
``DESTINATION`` overrides the target directory (tests; the default is upstream's).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from airflow_provider_training.embedded.workloads import storage_initializer

DESTINATIONS = {"dataset": "/workspace/dataset", "model": "/workspace/model"}
PVC_ROOT_ENV = "AIRFLOW_TRAINING_PVC_ROOT"  # <data dir>/volumes/pvc/<namespace>, set by the controller
UNSUPPORTED = ("hf://", "s3://", "cache://")
CLAIM_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # a PVC name: DNS-1123 subdomain


def pvc_problem(uri: str) -> str | None:
    """Why ``pvc://<claim>/<path>`` would reach outside a claim of the TrainJob's own namespace (None:
    it stays inside). The claim is a name, not a path; the path is relative, without ``..``."""
    if not uri.startswith("pvc://"):
        return None
    claim, _, inner = uri[len("pvc://") :].partition("/")
    if not CLAIM_NAME.match(claim) or ".." in claim:
        return (
            f"Invalid value: {uri!r}: pvc://<claim>/<path> needs the name of a PersistentVolumeClaim in the "
            "TrainJob's namespace (a DNS-1123 name, no '/', '..' or other namespace)"
        )
    parts = inner.split("/")
    if inner.startswith("/") or any(part == ".." for part in parts) or "\0" in inner:
        return (
            f"Invalid value: {uri!r}: the path inside the claim must be relative and must not contain '..' "
            "(pvc://<claim>/<relative path>)"
        )
    return None


def unsupported(uri: str) -> str | None:
    """Why the embedded control plane cannot initialize from ``uri`` (None: it can)."""
    if uri.startswith(UNSUPPORTED):
        scheme = uri.split("://", 1)[0]
        return (
            f"{uri}: the embedded control plane does not run Kubeflow's {scheme}:// initializer "
            "(it downloads with huggingface_hub / boto3 from the network); use kit://<ModelKit reference>, "
            "pvc://<claim>/<path> or a local path, or run the TrainJob on a cluster"
        )
    if not uri.startswith(("kit://", "pvc://", "file://", "/")):
        return f"{uri}: unsupported storageUri scheme (the embedded control plane understands kit://, pvc://, file://)"
    return None


def _copy(source: Path, destination: Path) -> None:
    destination.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, destination, dirs_exist_ok=True)
    else:
        shutil.copy2(source, destination / source.name)


def initialize(kind: str, uri: str, destination: Path) -> int:
    why = unsupported(uri)
    if why is not None:
        print(f"{kind}-initializer: {why}", file=sys.stderr, flush=True)
        return 2
    if uri.startswith("kit://"):
        return storage_initializer.initialize(uri, destination)
    if uri.startswith("pvc://"):
        claim, _, inner = uri[len("pvc://") :].partition("/")
        root = os.environ.get(PVC_ROOT_ENV)
        if not root:
            print(f"{kind}-initializer: {uri}: {PVC_ROOT_ENV} is not set", file=sys.stderr, flush=True)
            return 2
        why = pvc_problem(uri)
        if why is not None:  # admission refuses these; a runtime's own STORAGE_URI is checked here
            print(f"{kind}-initializer: {why}", file=sys.stderr, flush=True)
            return 2
        base = (Path(root) / claim).resolve()
        source = (base / inner).resolve()
        if not source.is_relative_to(base):  # a symlink inside the claim pointing out of it
            print(f"{kind}-initializer: {uri}: resolves outside the claim {claim}", file=sys.stderr, flush=True)
            return 2
    else:
        source = Path(uri[len("file://") :] if uri.startswith("file://") else uri)
    if not source.exists():
        print(f"{kind}-initializer: {uri}: {source} does not exist", file=sys.stderr, flush=True)
        return 1
    _copy(source, destination)
    print(f"{kind}-initializer: copied {uri} into {destination}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in DESTINATIONS:
        print("usage: trainer_initializer dataset|model  (STORAGE_URI in the environment)", file=sys.stderr)
        return 2
    kind = args[0]
    uri = os.environ.get("STORAGE_URI", "")
    if not uri:
        print(f"{kind}-initializer: STORAGE_URI is not set", file=sys.stderr, flush=True)
        return 2
    return initialize(kind, uri, Path(os.environ.get("DESTINATION") or DESTINATIONS[kind]))


if __name__ == "__main__":
    sys.exit(main())
