"""Push a ModelKit from the local store to a registry, pull one into it, and inspect remotely.

Blobs go first and the manifest last, so a failed push never leaves a tag that points at missing
blobs. Pulled blobs are verified before they enter the store; partial downloads live in
``storage/ingest`` and are resumed.
"""

from __future__ import annotations

import errno
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_training.kitops import index, mediatypes
from airflow_provider_training.kitops.diff import Side
from airflow_provider_training.kitops.indextransfer import describe_remote_index
from airflow_provider_training.kitops.localstore import Descriptor, LocalStore, StoreError
from airflow_provider_training.kitops.modelpack import read_kitfile
from airflow_provider_training.kitops.reference import DEFAULT_TAG, Reference, parse
from airflow_provider_training.kitops.registry import ProgressFn, RegistryClient, RegistryError

log = logging.getLogger(__name__)
MAX_PARENT_HOPS = 10


class IsAnIndexError(RegistryError):
    """A ModelKit was asked for, and the reference names a ModelKit index."""


@dataclass
class TransferResult:
    reference: Reference
    digest: str
    size: int  # manifest + config + layers
    transferred: int  # layer/config bytes actually sent or received
    layers: list[dict[str, Any]] = field(default_factory=list)


def _require_registry(ref: Reference) -> None:
    if ref.registry == "localhost":
        raise RegistryError(
            f"registry is required: {ref} has no registry host (use registry/namespace/repo:tag, e.g. "
            "ccr.ccs.tencentyun.com/ml-models/mnist-model:v1)"
        )


def _blobs(manifest: dict[str, Any]) -> list[Descriptor]:
    return [Descriptor.from_json(manifest["config"])] + [Descriptor.from_json(x) for x in manifest.get("layers") or []]


def push(
    store: LocalStore,
    source: Reference,
    client: RegistryClient,
    destination: Reference | None = None,
    progress: ProgressFn | None = None,
) -> TransferResult:
    """Push ``source`` (from the local store) to ``destination`` (default: the same reference)."""
    dest = destination or source
    _require_registry(dest)
    desc = store.resolve(source)
    manifest_bytes = store.read_blob(desc.digest)
    manifest = json.loads(manifest_bytes)
    sent = 0
    for blob in _blobs(manifest):
        if not store.has_blob(blob.digest):
            raise RegistryError(f"blob {blob.digest} of {source} is missing from the local store; pack it again")
        sent += client.push_blob(dest.repository, blob.digest, blob.size, store.blob_path(blob.digest), progress)
    tags = [t for t in (dest.tag or (DEFAULT_TAG if not dest.digest else ""), *dest.extra_tags) if t]
    for tag in tags or [desc.digest]:
        client.put_manifest(dest.repository, tag, manifest_bytes)
    size = desc.size + sum(b.size for b in _blobs(manifest))
    log.info("Pushed %s", desc.digest)
    return TransferResult(dest, desc.digest, size, sent, _layer_summary(manifest))


def _layer_summary(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for layer in manifest.get("layers") or []:
        out.append(
            {
                "mediaType": layer["mediaType"],
                "digest": layer["digest"],
                "size": layer["size"],
                "path": (layer.get("annotations") or {}).get(mediatypes.ANNOTATION_FILEPATH, ""),
            }
        )
    return out


def fetch_manifest(client: RegistryClient, ref: Reference) -> tuple[bytes, str, dict[str, Any]]:
    _require_registry(ref)
    data, digest = client.get_manifest(ref.repository, ref.target)
    try:
        manifest = json.loads(data)
    except ValueError:
        raise RegistryError(f"reference {ref} on {ref.registry} has a manifest that is not JSON") from None
    if index.is_index_document(manifest):
        raise IsAnIndexError(describe_remote_index(data, ref))
    if not isinstance(manifest, dict) or not mediatypes.is_modelkit_manifest(manifest):
        raise RegistryError(
            f"reference {ref} exists but is not a ModelKit or ModelPack (config media type "
            f"{(manifest.get('config') or {}).get('mediaType') if isinstance(manifest, dict) else None!r})"
        )
    try:
        mediatypes.validate_manifest(manifest, f"ModelKit {ref}")
    except mediatypes.MediaTypeError as exc:
        raise RegistryError(str(exc)) from None
    return data, digest, manifest


def pull(
    store: LocalStore,
    ref: Reference,
    client: RegistryClient,
    progress: ProgressFn | None = None,
    _hops: int = 0,
) -> TransferResult:
    """Pull ``ref`` into the local store (and the ModelKits its ``model.path`` references)."""
    data, digest, manifest = fetch_manifest(client, ref)
    store.ensure()
    store.ingest.mkdir(parents=True, exist_ok=True)
    received = 0
    for blob in _blobs(manifest):
        if store.has_blob(blob.digest):
            continue
        partial = store.ingest / (blob.digest.split(":", 1)[1] + ".partial")
        try:
            client.fetch_blob(ref.repository, blob.digest, blob.size, partial, progress)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StoreError(
                    f"not enough disk space in the ModelKit store {store.root} to pull {ref} "
                    f"({exc.strerror}); "
                    "free space or point KITOPS_HOME at a larger disk. Nothing was tagged."
                ) from exc
            raise
        store.adopt_blob(partial, blob.digest)
        received += blob.size
    store.put_bytes(data)
    desc = Descriptor(mediatypes.MANIFEST, digest, len(data))
    store.add_manifest(ref.repo_key, desc, [ref.tag] if ref.tag and not ref.digest else [])
    config = read_kitfile(manifest, store.read_blob(manifest["config"]["digest"]), str(ref))
    parent = config.model_reference()
    if parent:
        if _hops >= MAX_PARENT_HOPS:
            raise RegistryError(f"ModelKit reference chain of {ref} is longer than {MAX_PARENT_HOPS}")
        pref = parse(parent, default_tag=DEFAULT_TAG)
        if pref.registry == ref.registry:
            pull(store, pref, client, progress, _hops + 1)
        else:
            log.warning("%s references %s on another registry; pull it separately", ref, parent)
    size = len(data) + sum(b.size for b in _blobs(manifest))
    return TransferResult(ref, digest, size, received, _layer_summary(manifest))


def inspect_remote(client: RegistryClient, ref: Reference) -> dict[str, Any]:
    _, digest, manifest = fetch_manifest(client, ref)
    config = client.get_blob_bytes(ref.repository, manifest["config"]["digest"])
    return _inspect(digest, manifest, config)


def inspect_local(store: LocalStore, ref: Reference) -> dict[str, Any]:
    desc = store.resolve(ref)
    manifest = store.read_manifest(desc)
    return _inspect(desc.digest, manifest, store.read_blob(manifest["config"]["digest"]))


def _inspect(digest: str, manifest: dict[str, Any], config: bytes) -> dict[str, Any]:
    """kit's ``inspect`` output: ``{digest, cliVersion, kitfile, manifest}`` (for a ModelPack the
    Kitfile kit would read from it)."""
    if mediatypes.manifest_format(manifest) == "modelpack":
        kitfile = read_kitfile(manifest, config).to_go_dict()
    else:
        kitfile = json.loads(config)
    return {
        "digest": digest,
        "cliVersion": (manifest.get("annotations") or {}).get(mediatypes.ANNOTATION_CLI_VERSION, ""),
        "kitfile": kitfile,
        "manifest": manifest,
    }


def local_side(store: LocalStore, ref: Reference, text: str | None = None) -> Side:
    """A ModelKit in the local store, for :func:`kitops.diff.diff`."""
    desc = store.resolve(ref)
    manifest = store.read_manifest(desc)
    return Side(text or str(ref), desc.digest, manifest, store.read_blob(manifest["config"]["digest"]), store.open_blob)


def remote_side(client: RegistryClient, ref: Reference, text: str | None = None) -> Side:
    """A ModelKit in a registry, for :func:`kitops.diff.diff` (layers are streamed, never stored)."""
    _, digest, manifest = fetch_manifest(client, ref)
    config = client.get_blob_bytes(ref.repository, manifest["config"]["digest"])

    def open_blob(blob: str) -> Any:
        return client.open_blob_stream(ref.repository, blob)

    return Side(text or str(ref), digest, manifest, config, open_blob)
