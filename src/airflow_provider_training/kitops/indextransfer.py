"""ModelKit indexes between the local store and a registry, and selecting a ModelKit from one
(``kit index push|pull``, ``kit pull|unpack -l KEY=VALUE``).

An index is pushed and pulled as the exact bytes it has, so its digest never changes in transit.
The registry must already hold every ModelKit an index lists (distribution refuses the index
otherwise); that is checked first, so the error names the missing ModelKits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from airflow_provider_training.kitops import index as ix
from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.indexstore import IndexStore
from airflow_provider_training.kitops.listing import display_repository
from airflow_provider_training.kitops.localstore import LocalStore, NotInStoreError
from airflow_provider_training.kitops.reference import Reference
from airflow_provider_training.kitops.registry import RegistryClient, RegistryError


@dataclass(frozen=True)
class Selected:
    index_digest: str
    entry: ix.Entry
    reference: Reference  # the index's repository, pinned to the selected ModelKit's digest


def fetch_document(client: RegistryClient, ref: Reference) -> tuple[bytes, str, dict[str, Any]]:
    if ref.registry == "localhost":
        raise RegistryError(f"registry is required: {ref} has no registry host")
    data, digest = client.get_manifest(ref.repository, ref.target)
    try:
        doc = json.loads(data)
    except ValueError:
        raise RegistryError(f"reference {ref} on {ref.registry} is not JSON") from None
    if not isinstance(doc, dict):
        raise RegistryError(f"reference {ref} on {ref.registry} is not a JSON object")
    return data, digest, doc


def fetch_index(client: RegistryClient, ref: Reference) -> tuple[bytes, str, ix.ModelKitIndex]:
    data, digest, doc = fetch_document(client, ref)
    if not ix.is_index_document(doc):
        raise ix.NotAnIndexError(f"{ref} is a ModelKit or another artifact, not a ModelKit index")
    return data, digest, ix.parse(data, f"index {ref}")


def pull_index(istore: IndexStore, ref: Reference, client: RegistryClient) -> str:
    """Only the index; the ModelKits it lists stay in the registry (as ``kit index pull``)."""
    data, _, _ = fetch_index(client, ref)
    return istore.put(ref, data).digest


def push_index(istore: IndexStore, src: Reference, client: RegistryClient, dest: Reference | None = None) -> str:
    dest = dest or src
    if dest.registry == "localhost":
        raise RegistryError(f"registry is required when pushing: {dest} has no registry host")
    desc, data = istore.resolve(src)
    index = ix.parse(data, f"index {src}")
    missing = [e for e in index.entries if not client.manifest_exists(dest.repository, e.digest)]
    if missing:
        raise RegistryError(
            f"{dest.registry}/{dest.repository} does not contain every ModelKit the index references. Push "
            f"those ModelKits first, then retry; missing:\n{ix.describe(missing, display_repository(dest.repo_key))}"
        )
    client.put_manifest(dest.repository, dest.tag or "latest", data, mediatypes.INDEX)
    return desc.digest


def _select(index: ix.ModelKitIndex, digest: str, ref: Reference, selector: dict[str, str], what: str) -> Selected:
    repo = display_repository(ref.repo_key)
    if not selector:
        how = (
            f"select the ModelKit to {what} with --label KEY=VALUE"
            if what in ("pull", "unpack")
            else f"{what} one of its ModelKits by tag or digest, or the index itself with 'kit index inspect'"
        )
        raise ix.ModelKitIndexError(
            f"{ref} is a ModelKit index of {len(index.entries)} ModelKits; {how}. "
            f"The index contains:\n{ix.describe(index.entries, repo)}"
        )
    entry = ix.select(index, selector, repo)
    ix.check_entry_is_modelkit(entry, f"index {ref}")
    return Selected(digest, entry, Reference(ref.registry, ref.repository, "", entry.digest))


def select_local(istore: IndexStore, ref: Reference, selector: dict[str, str], what: str) -> Selected | None:
    """From an index in the local store; None when there is none under ``ref``."""
    try:
        desc, data = istore.resolve(ref)
    except NotInStoreError:
        return None
    return _select(ix.parse(data, f"index {ref}"), desc.digest, ref, selector, what)


def select_remote(client: RegistryClient, ref: Reference, selector: dict[str, str], what: str) -> Selected:
    data, digest, doc = fetch_document(client, ref)
    if not ix.is_index_document(doc):
        raise ix.ModelKitIndexError(
            f"could not find ModelKit index {ref}: it is a ModelKit, and --label selects from an index "
            f"(drop --label to {what} it)"
        )
    return _select(ix.parse(data, f"index {ref}"), digest, ref, selector, what)


def describe_remote_index(data: bytes, ref: Reference) -> str:
    """For commands that want a ModelKit but were given an index."""
    try:
        index = ix.parse(data, f"index {ref}")
    except ix.ModelKitIndexError as exc:
        return str(exc)
    return (
        f"{ref} is a ModelKit index of {len(index.entries)} ModelKits, not a ModelKit; select one with "
        "--label KEY=VALUE (pull, unpack) or read the index with 'kit index inspect'"
    )


def ensure_local_modelkit(store: LocalStore, selected: Selected) -> Reference:
    """The selected ModelKit's reference once it is in the local store."""
    store.resolve(selected.reference)  # raises NotInStoreError when absent
    return selected.reference
