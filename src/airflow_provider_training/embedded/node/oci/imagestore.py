"""The node's image store: manifests, configs and unpacked layers, content-addressed under
``<home>/node/oci``, each layer unpacked once for every pod and container that uses it.

    blobs/sha256/<hex>          manifests and image configs, as the registry served them
    layers/sha256/<hex>/        a layer unpacked (keyed by its blob digest; ``layers.unpack``)
    refs/<sha256 of name>.json  the manifest digest a reference resolved to last, for IfNotPresent / Never
    tmp/                        downloads in progress (resumed by the next pull), removed once unpacked

A pull resolves the reference (an index picks this machine's platform), fetches the config, then
each layer not unpacked yet: downloaded through ``kitops.registry`` (digest checked), unpacked
(diff_id checked), the download removed: the disk holds one copy of each layer. Two pulls of the
same layer (two pods starting at once) take turns on a lock file; the second finds it unpacked.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded.node.oci import layers
from airflow_provider_training.embedded.node.oci.references import Source
from airflow_provider_training.kitops.credentials import Credential
from airflow_provider_training.kitops.registry import RegistryClient, RegistryError, RegistryOptions

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
ACCEPT = ", ".join((OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST))
INDEXES = (OCI_INDEX, DOCKER_LIST)
MAX_CONFIG = 4 << 20
LAYER_WORKERS = 3  # layers of one image pulled at once (containerd's default is 3 too)
ARCHITECTURES = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
}


class PullError(RuntimeError):
    """The image cannot be pulled; the message is what the kubelet's event says after the image."""


@dataclass
class Image:
    """An image in the store: what a container is made from."""

    name: str  # the reference it was pulled as
    digest: str  # the manifest's
    manifest: dict[str, Any]
    config: dict[str, Any]
    layer_dirs: list[Path] = field(default_factory=list)  # bottom first

    @property
    def size(self) -> int:
        """Compressed layers + config: what ``Image size`` in the kubelet's Pulled event counts."""
        return int(self.manifest["config"].get("size", 0)) + sum(
            int(layer.get("size", 0)) for layer in self.manifest.get("layers") or []
        )

    @property
    def image_id(self) -> str:
        """``imageID`` of a container status: the repository at the manifest digest."""
        name = self.name.split("@", 1)[0]
        if name.rfind(":") > name.rfind("/"):
            name = name[: name.rfind(":")]
        return f"{name}@{self.digest}"


@dataclass
class PullResult:
    image: Image
    downloaded: int  # bytes fetched this time (0: every layer was there)
    seconds: float


def platform_architecture() -> str:
    return ARCHITECTURES.get(platform.machine().lower(), platform.machine().lower())


class ImageStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        for part in ("blobs/sha256", "layers/sha256", "refs", "tmp", "locks"):
            (root / part).mkdir(parents=True, exist_ok=True)

    # -- paths ----------------------------------------------------------------------------------
    def blob_path(self, digest: str) -> Path:
        return self.root / "blobs" / "sha256" / _hex(digest)

    def layer_path(self, digest: str) -> Path:
        return self.root / "layers" / "sha256" / _hex(digest)

    def _ref_path(self, name: str) -> Path:
        return self.root / "refs" / f"{hashlib.sha256(name.encode()).hexdigest()}.json"

    # -- reading --------------------------------------------------------------------------------
    def lookup(self, name: str) -> Image | None:
        """The image ``name`` resolved to at its last pull, if every part of it is still here."""
        try:
            digest = json.loads(self._ref_path(name).read_text())["digest"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return self.load(name, digest)

    def load(self, name: str, digest: str) -> Image | None:
        try:
            manifest = json.loads(self.blob_path(digest).read_bytes())
            config = json.loads(self.blob_path(manifest["config"]["digest"]).read_bytes())
        except (OSError, ValueError, KeyError, TypeError):
            return None
        dirs = [self.layer_path(layer["digest"]) for layer in manifest.get("layers") or []]
        if not all(d.is_dir() for d in dirs):
            return None
        return Image(name, digest, manifest, config, dirs)

    # -- pulling --------------------------------------------------------------------------------
    def pull(self, source: Source, credential: Credential | None, options: RegistryOptions | None = None) -> PullResult:
        """Resolve ``source`` on its registry and make every layer of it present (PullError: why not)."""
        started = time.monotonic()
        opts = options or RegistryOptions(retries=2, timeout=60.0)
        opts.plain_http, opts.tls_verify = source.plain_http, source.tls_verify
        ref = source.ref
        target = ref.digest or ref.tag or "latest"
        downloaded = 0
        try:
            with RegistryClient(ref.registry, credential, opts) as client:
                data, digest = client.get_manifest(ref.repository, target, accept=ACCEPT)
                manifest = _json(data, f"manifest of {source.pulled}")
                if manifest.get("mediaType") in INDEXES or "manifests" in manifest:
                    digest = _choose(manifest, source.pulled)
                    data, digest = client.get_manifest(ref.repository, digest, accept=ACCEPT)
                    manifest = _json(data, f"manifest of {source.pulled}")
                config_digest = str((manifest.get("config") or {}).get("digest") or "")
                if not config_digest or not isinstance(manifest.get("layers"), list):
                    raise PullError(f"{source.pulled} is not a container image (its manifest has no config and layers)")
                config_bytes = client.get_blob_bytes(ref.repository, config_digest, limit=MAX_CONFIG)
                config = _json(config_bytes, f"config of {source.pulled}")
                diff_ids = list(((config.get("rootfs") or {}).get("diff_ids")) or [])
                if len(diff_ids) != len(manifest["layers"]):
                    raise PullError(
                        f"{source.pulled}: its config lists {len(diff_ids)} layer diff_ids for {len(manifest['layers'])} layers"
                    )
                # layers are independent directories: fetched and unpacked side by side
                with ThreadPoolExecutor(max_workers=LAYER_WORKERS) as pool:
                    futures = [
                        pool.submit(self._layer, client, ref.repository, layer, str(diff_id))
                        for layer, diff_id in zip(manifest["layers"], diff_ids, strict=True)
                    ]
                    downloaded += sum(future.result() for future in futures)
        except layers.LayerError as exc:
            raise PullError(str(exc)) from None
        except RegistryError as exc:
            raise PullError(explain(exc)) from None
        except OSError as exc:
            raise PullError(f"cannot store the image under {self.root}: {exc.strerror or exc}") from None
        self._write_blob(config_digest, config_bytes)
        self._write_blob(digest, data)
        _write_atomically(self._ref_path(source.pulled), json.dumps({"name": source.pulled, "digest": digest}).encode())
        image = self.load(source.pulled, digest)
        if image is None:
            raise PullError(f"{source.pulled}: a layer was removed while it was pulled; try again")
        return PullResult(image, downloaded, time.monotonic() - started)

    def _layer(self, client: RegistryClient, repository: str, layer: dict[str, Any], diff_id: str) -> int:
        digest = str(layer.get("digest") or "")
        if not digest.startswith("sha256:") or len(digest) != 71:
            raise PullError(f"a layer of {repository} has an unsupported digest {digest!r}")
        target = self.layer_path(digest)
        if target.is_dir():
            return 0
        layers.compression_of(str(layer.get("mediaType") or ""), digest)  # refuse foreign layers before fetching
        with self._locked(digest):
            if target.is_dir():  # unpacked by another pull while this one waited
                return 0
            partial = self.root / "tmp" / f"{_hex(digest)}.partial"
            client.fetch_blob(repository, digest, int(layer.get("size") or 0), partial)
            try:
                layers.unpack(partial, str(layer["mediaType"]), digest, diff_id, target)
            finally:
                partial.unlink(missing_ok=True)  # one copy of the layer: the unpacked one
            return int(layer.get("size") or 0)

    @contextlib.contextmanager
    def _locked(self, digest: str) -> Iterator[None]:
        with open(self.root / "locks" / f"{_hex(digest)}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _write_blob(self, digest: str, data: bytes) -> None:
        path = self.blob_path(digest)
        if not path.exists():
            _write_atomically(path, data)

    def disk_usage(self) -> int:
        """Bytes the store holds (layers, blobs): what ``benchmarks/images.py`` reports."""
        total = 0
        for dirpath, _, files in os.walk(self.root):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
        return total


def explain(exc: RegistryError) -> str:
    """The registry's answer as the kubelet words it: the HTTP status first (``401 Unauthorized``)."""
    from airflow_provider_training.kitops.registry import AuthenticationError, DigestMismatchError, NotFoundError

    text = str(exc)
    if isinstance(exc, NotFoundError):
        return f"not found: {text}"
    if isinstance(exc, AuthenticationError):
        if "403" in text or "permission" in text:
            return f"403 Forbidden: {text}"
        return f"401 Unauthorized: pull access denied, repository does not exist or may require authorization: {text}"
    if isinstance(exc, DigestMismatchError):
        return f"digest mismatch: {text}"
    return text


def _choose(index: dict[str, Any], name: str) -> str:
    arch = platform_architecture()
    entries = [m for m in index.get("manifests") or [] if isinstance(m, dict)]
    for entry in entries:
        plat = entry.get("platform") or {}
        if plat.get("os", "linux") == "linux" and plat.get("architecture") == arch:
            return str(entry["digest"])
    platforms = ", ".join(
        f"{(e.get('platform') or {}).get('os', '?')}/{(e.get('platform') or {}).get('architecture', '?')}"
        for e in entries
    )
    raise PullError(f"{name} has no image for linux/{arch} (it has: {platforms or 'none'})")


def _json(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError:
        raise PullError(f"the {what} is not JSON") from None
    if not isinstance(value, dict):
        raise PullError(f"the {what} is not a JSON object")
    return value


def _hex(digest: str) -> str:
    algorithm, _, value = digest.partition(":")
    if algorithm != "sha256" or len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise PullError(f"unsupported digest {digest!r}")
    return value


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
