"""ModelKit indexes in the local store, kept apart from the ModelKits (as kit 1.17 does: an index
and a ModelKit may share a tag, each command works on its own kind).

The index bytes are a blob in ``storage/blobs/sha256`` like any other; which indexes a repository
has, and their tags, live in ``storage/<base64(registry/repo)>-kitindexes.json``. kit's own file
for this was not available to read, so the name is this provider's: it does not match kit's
``-index.json`` pattern (kit's ``list`` never mistakes it for a ModelKit repository), and the index
is not added to ``storage/index.json`` (kit's oras store would try to walk it to ModelKits that
may not be present locally).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.localstore import Descriptor, LocalStore, NotInStoreError, repo_file_base
from airflow_provider_training.kitops.reference import Reference

_FILE_RE = re.compile(r"^([-A-Za-z0-9_-]*={0,3})-kitindexes\.json$")


@dataclass(frozen=True)
class StoredIndex:
    repo_key: str
    tags: tuple[str, ...]
    descriptor: Descriptor


class IndexStore:
    def __init__(self, store: LocalStore) -> None:
        self.store = store

    def _path(self, repo_key: str) -> Path:
        return self.store.root / f"{repo_file_base(repo_key)}-kitindexes.json"

    def _read(self, repo_key: str) -> dict[str, Any]:
        data: dict[str, Any] = self.store.read_json(self._path(repo_key), {"manifests": [], "tags": {}})
        data.setdefault("manifests", [])
        data.setdefault("tags", {})
        return data

    def _write(self, repo_key: str, data: dict[str, Any]) -> None:
        if data["manifests"]:
            self.store.write_json(self._path(repo_key), data, compact=True)
        else:
            self._path(repo_key).unlink(missing_ok=True)

    def put(self, ref: Reference, data: bytes) -> Descriptor:
        """Store index bytes as given (a pulled index keeps its digest) and tag them; the index
        the tag pointed at before goes when nothing else names it (kit's ``writeIndexBytes``)."""
        desc = Descriptor(mediatypes.INDEX, self.store.put_bytes(data), len(data))
        with self.store.lock():
            state = self._read(ref.repo_key)
            previous = state["tags"].get(ref.tag)
            if not any(m["digest"] == desc.digest for m in state["manifests"]):
                state["manifests"].append(desc.to_json())
            state["tags"][ref.tag] = desc.to_json()
            orphan = previous and not any(d["digest"] == previous["digest"] for d in state["tags"].values())
            if orphan:
                state["manifests"] = [m for m in state["manifests"] if m["digest"] != previous["digest"]]
                self._drop_blob(previous["digest"], ref.repo_key)
            self._write(ref.repo_key, state)
        return desc

    def resolve(self, ref: Reference) -> tuple[Descriptor, bytes]:
        state = self._read(ref.repo_key)
        found = None
        if ref.digest:
            found = next((m for m in state["manifests"] if m["digest"] == ref.digest), None)
        else:
            found = state["tags"].get(ref.tag or "latest")
        if found is None:
            raise NotInStoreError(f"no ModelKit index {ref} in the local store ('kit index pull' or 'create' it)")
        desc = Descriptor.from_json(found)
        return desc, self.store.read_blob(desc.digest)

    def delete(self, ref: Reference) -> Descriptor:
        desc, _ = self.resolve(ref)
        with self.store.lock():
            state = self._read(ref.repo_key)
            state["tags"] = {t: d for t, d in state["tags"].items() if d["digest"] != desc.digest}
            state["manifests"] = [m for m in state["manifests"] if m["digest"] != desc.digest]
            self._write(ref.repo_key, state)
            self._drop_blob(desc.digest, ref.repo_key)
        return desc

    def _drop_blob(self, digest: str, except_repo: str) -> None:
        """Remove an index blob no other repository's indexes (or ModelKits) still name."""
        if any(s.descriptor.digest == digest for s in self.list() if s.repo_key != except_repo):
            return
        if any(k.descriptor.digest == digest for k in self.store.list()):
            return
        self.store.blob_path(digest).unlink(missing_ok=True)

    def list(self) -> list[StoredIndex]:
        out: list[StoredIndex] = []
        for repo_key, _ in self.store.repo_files(_FILE_RE):
            state = self._read(repo_key)
            for entry in state["manifests"]:
                tags = tuple(sorted(t for t, d in state["tags"].items() if d["digest"] == entry["digest"]))
                out.append(StoredIndex(repo_key, tags, Descriptor.from_json(entry)))
        return out
