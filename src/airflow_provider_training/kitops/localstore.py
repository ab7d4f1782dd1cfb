"""kit's local storage (``kitops.md`` §3.2): one OCI layout shared by all repositories plus
per-repository ``<base64(registry/repo)>-index.json`` and ``-tags.json`` files.

A ModelKit packed here can be pushed by ``kit push`` and one packed by ``kit`` can be pushed here.
Blobs are written before any index, and indexes are replaced atomically, so a failure (disk full,
crash) never leaves a tag pointing at a missing blob.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.reference import Reference

_INDEX_FILE_RE = re.compile(r"^([-A-Za-z0-9_-]*={0,3})-index\.json$")


class StoreError(RuntimeError):
    pass


class NotInStoreError(StoreError, LookupError):
    pass


def kitops_home() -> Path:
    """``$KITOPS_HOME``, else ``$XDG_DATA_HOME/kitops``, else ``~/.local/share/kitops`` (kit's rule)."""
    if os.environ.get("KITOPS_HOME"):
        return Path(os.environ["KITOPS_HOME"]).absolute()
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "kitops"


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Descriptor:
        return cls(d["mediaType"], d["digest"], int(d["size"]))


@dataclass(frozen=True)
class StoredModelKit:
    repo_key: str
    tags: tuple[str, ...]
    descriptor: Descriptor


def repo_file_base(repo_key: str) -> str:
    return base64.urlsafe_b64encode(repo_key.encode()).decode()


def _no_space(path: Path, exc: OSError) -> StoreError:
    return StoreError(
        f"not enough disk space in the ModelKit store {path} ({exc.strerror}); free space or point "
        "KITOPS_HOME at a larger disk. The store was left unchanged."
    )


class LocalStore:
    def __init__(self, home: Path | None = None) -> None:
        self.home = home or kitops_home()
        self.root = self.home / "storage"
        self.blobs = self.root / "blobs" / "sha256"
        self.ingest = self.root / "ingest"

    # -- setup / locking ------------------------------------------------------------------------
    def ensure(self) -> None:
        self.blobs.mkdir(parents=True, exist_ok=True)
        layout = self.root / "oci-layout"
        if not layout.exists():
            self.write_json(layout, {"imageLayoutVersion": "1.0.0"}, compact=True)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        self.ensure()
        with open(self.root / ".lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def cache_dir(self, kind: str = "pack") -> Path:
        path = self.home / "cache" / kind
        path.mkdir(parents=True, exist_ok=True)
        return path

    # -- blobs ----------------------------------------------------------------------------------
    def blob_path(self, digest: str) -> Path:
        algo, _, hexpart = digest.partition(":")
        if algo != "sha256" or not re.fullmatch(r"[a-f0-9]{64}", hexpart):
            raise StoreError(f"unsupported digest {digest!r}")
        return self.blobs / hexpart

    def has_blob(self, digest: str) -> bool:
        return self.blob_path(digest).is_file()

    def open_blob(self, digest: str) -> BinaryIO:
        try:
            return open(self.blob_path(digest), "rb")
        except FileNotFoundError:
            raise NotInStoreError(f"blob {digest} is missing from the local store {self.root}") from None

    def read_blob(self, digest: str) -> bytes:
        with self.open_blob(digest) as fh:
            return fh.read()

    @contextlib.contextmanager
    def new_blob_file(self, kind: str = "pack") -> Iterator[tuple[BinaryIO, Path]]:
        """A temp file in ``<home>/cache/<kind>``, removed on error; on success the caller adopts it
        with :meth:`adopt_blob` once it knows the digest."""
        self.ensure()
        fd, name = tempfile.mkstemp(prefix="blob-", dir=self.cache_dir(kind))
        path = Path(name)
        try:
            with os.fdopen(fd, "wb") as fh:
                yield fh, path
        except OSError as exc:
            path.unlink(missing_ok=True)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise _no_space(self.root, exc) from exc
            raise
        except BaseException:
            path.unlink(missing_ok=True)
            raise

    def adopt_blob(self, tmp: Path, digest: str) -> None:
        """Move a finished temp file to ``blobs/sha256/<hex>`` (same filesystem, atomic)."""
        dest = self.blob_path(digest)
        if dest.exists():
            tmp.unlink(missing_ok=True)
            return
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)

    def put_bytes(self, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if self.has_blob(digest):
            return digest
        self.ensure()
        fd, name = tempfile.mkstemp(prefix="blob-", dir=self.cache_dir("pack"))
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            Path(name).unlink(missing_ok=True)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise _no_space(self.root, exc) from exc
            raise
        self.adopt_blob(Path(name), digest)
        return digest

    # -- indexes --------------------------------------------------------------------------------
    def write_json(self, path: Path, data: Any, compact: bool = False) -> None:
        text = json.dumps(data, separators=(",", ":")) if compact else json.dumps(data, indent=None)
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_text(text)
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise _no_space(self.root, exc) from exc
            raise

    def read_json(self, path: Path, default: Any) -> Any:
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            return default
        except json.JSONDecodeError as exc:
            raise StoreError(f"corrupt store file {path}: {exc}") from exc

    def _index_path(self, repo_key: str) -> Path:
        return self.root / f"{repo_file_base(repo_key)}-index.json"

    def _tags_path(self, repo_key: str) -> Path:
        return self.root / f"{repo_file_base(repo_key)}-tags.json"

    def add_manifest(self, repo_key: str, desc: Descriptor, tags: list[str]) -> None:
        """Record a manifest (whose blobs are all present) in the repository and tag it."""
        with self.lock():
            shared = self.read_json(
                self.root / "index.json", {"schemaVersion": 2, "mediaType": mediatypes.INDEX, "manifests": []}
            )
            if not any(m.get("digest") == desc.digest for m in shared.get("manifests") or []):
                entry = desc.to_json()
                entry["annotations"] = {mediatypes.ANNOTATION_REF_NAME: desc.digest}
                shared.setdefault("manifests", []).append(entry)
            index_path = self._index_path(repo_key)
            index = self.read_json(index_path, {"schemaVersion": 2, "manifests": []})
            manifests = index.get("manifests") or []
            if not any(m.get("digest") == desc.digest for m in manifests):
                manifests.append(desc.to_json())
            index["manifests"] = manifests
            tags_path = self._tags_path(repo_key)
            tag_map = self.read_json(tags_path, {})
            for tag in tags:
                tag_map[tag] = desc.to_json()
            self.write_json(self.root / "index.json", shared, compact=True)
            self.write_json(index_path, index, compact=True)
            if tag_map:
                self.write_json(tags_path, tag_map, compact=True)

    def resolve(self, ref: Reference) -> Descriptor:
        """The manifest descriptor a reference names in the local store."""
        if ref.digest:
            index = self.read_json(self._index_path(ref.repo_key), {"manifests": []})
            for m in index.get("manifests") or []:
                if m.get("digest") == ref.digest:
                    return Descriptor.from_json(m)
            if ref.repository == "_" and self.has_blob(ref.digest):
                return Descriptor(mediatypes.MANIFEST, ref.digest, self.blob_path(ref.digest).stat().st_size)
            raise NotInStoreError(f"ModelKit {ref} is not in the local store (pull or pack it first)")
        tags = self.read_json(self._tags_path(ref.repo_key), {})
        tag = ref.tag or "latest"
        if tag not in tags:
            raise NotInStoreError(f"ModelKit {ref.repo_key}:{tag} is not in the local store (pull or pack it first)")
        return Descriptor.from_json(tags[tag])

    def read_manifest(self, desc: Descriptor) -> dict[str, Any]:
        data = self.read_blob(desc.digest)
        manifest: dict[str, Any] = json.loads(data)
        return manifest

    def list(self) -> list[StoredModelKit]:
        out: list[StoredModelKit] = []
        for repo_key, path in self.repo_files(_INDEX_FILE_RE):
            index = self.read_json(path, {"manifests": []})
            tags = self.read_json(self._tags_path(repo_key), {})
            for entry in index.get("manifests") or []:
                desc = Descriptor.from_json(entry)
                names = tuple(sorted(t for t, d in tags.items() if d.get("digest") == desc.digest))
                out.append(StoredModelKit(repo_key, names, desc))
        return out

    def repo_files(self, pattern: re.Pattern[str]) -> Iterator[tuple[str, Path]]:
        """``(registry/repo, path)`` of each per-repository file whose name ``pattern`` matches
        (its group 1 being the base64url repository name), in name order."""
        if not self.root.is_dir():
            return
        for path in sorted(self.root.iterdir()):
            m = pattern.match(path.name)
            if not m:
                continue
            try:
                yield base64.urlsafe_b64decode(m[1]).decode(), path
            except ValueError:
                continue

    def tag(self, src: Reference, dst: Reference) -> Descriptor:
        desc = self.resolve(src)
        self.add_manifest(dst.repo_key, desc, [dst.tag or "latest"])
        return desc

    def remove(self, ref: Reference) -> Descriptor:
        """Untag (or remove by digest); blobs go only when no repository references them any more."""
        desc = self.resolve(ref)
        with self.lock():
            tags_path = self._tags_path(ref.repo_key)
            tags = self.read_json(tags_path, {})
            if ref.digest:
                tags = {t: d for t, d in tags.items() if d.get("digest") != desc.digest}
            else:
                tags.pop(ref.tag or "latest", None)
            still_tagged = any(d.get("digest") == desc.digest for d in tags.values())
            if tags:
                self.write_json(tags_path, tags, compact=True)
            else:
                tags_path.unlink(missing_ok=True)
            if still_tagged:
                return desc
            index_path = self._index_path(ref.repo_key)
            index = self.read_json(index_path, {"manifests": []})
            index["manifests"] = [m for m in index.get("manifests") or [] if m.get("digest") != desc.digest]
            if index["manifests"]:
                self.write_json(index_path, index, compact=True)
            else:
                index_path.unlink(missing_ok=True)
            if not any(k.descriptor.digest == desc.digest for k in self.list()):
                self._gc(desc)
        return desc

    def _gc(self, desc: Descriptor) -> None:
        shared_path = self.root / "index.json"
        shared = self.read_json(shared_path, {"schemaVersion": 2, "mediaType": mediatypes.INDEX, "manifests": []})
        shared["manifests"] = [m for m in shared.get("manifests") or [] if m.get("digest") != desc.digest]
        self.write_json(shared_path, shared, compact=True)
        manifest = self.read_manifest(desc)
        referenced: set[str] = set()
        for entry in shared["manifests"]:
            try:
                other = json.loads(self.read_blob(entry["digest"]))
            except (StoreError, OSError, ValueError):
                continue
            referenced.add(other.get("config", {}).get("digest", ""))
            referenced.update(layer.get("digest", "") for layer in other.get("layers") or [])
        for child in [manifest.get("config", {}), *(manifest.get("layers") or [])]:
            digest = child.get("digest", "")
            if digest and digest not in referenced:
                self.blob_path(digest).unlink(missing_ok=True)
        self.blob_path(desc.digest).unlink(missing_ok=True)


def copy_file(src: BinaryIO, dst: BinaryIO) -> None:
    shutil.copyfileobj(src, dst, 1 << 20)
