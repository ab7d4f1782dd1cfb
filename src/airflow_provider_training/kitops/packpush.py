"""``kit pack --push`` (kit v1.16): pack straight into a registry, without a copy in the local store.

Each layer is tarred once and streamed into a registry upload as it is produced (its digest is
known only at its end, which the OCI upload protocol allows: PATCH the bytes, then PUT with the
digest). Nothing is written to disk; memory stays bounded by the upload pipe (a few MiB). The
local store is only read, for ModelKits that ``model.path`` references.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.pack import (
    BlobSink,
    LayerWriter,
    PackedLayer,
    PackResult,
    build,
    check_options,
    load_kitfile,
)
from airflow_provider_training.kitops.reference import DEFAULT_TAG, Reference
from airflow_provider_training.kitops.registry import RegistryClient, RegistryError
from airflow_provider_training.kitops.tarlayer import LayerBlob, ProgressFn
from airflow_provider_training.specs.kitfile import Kitfile, check

log = logging.getLogger(__name__)


def _stream_sink(client: RegistryClient, repo: str, sent: list[int]) -> BlobSink:
    def sink(write: LayerWriter) -> tuple[LayerBlob, str | None]:
        class _Out:
            def __init__(self, blob: LayerBlob, metadata: str | None) -> None:
                self.blob, self.metadata, self.digest = blob, metadata, blob.digest

        def produce(fh: BinaryIO) -> _Out:
            return _Out(*write(fh))

        out, n = client.push_stream(repo, produce)
        sent.append(n)
        return out.blob, out.metadata

    return sink


def pack_and_push(
    context: str | Path,
    reference: Reference,
    client: RegistryClient,
    *,
    kitfile: str | Path | Kitfile | None = None,
    compression: str = "none",
    layer_format: str = "tar",
    modelpack: bool = False,
    store: LocalStore | None = None,
    progress: ProgressFn | None = None,
    on_layer: Callable[[PackedLayer], None] | None = None,
) -> PackResult:
    """Pack ``context`` and push it as ``reference`` (and its extra tags); the local store is not
    written. Blobs go first, the manifest last: a failure leaves no tag behind."""
    if reference.registry == "localhost":
        raise RegistryError(f"registry is required: {reference} has no registry host (pack --push needs one)")
    ctx = Path(context).absolute()
    if not ctx.is_dir():
        raise FileNotFoundError(f"ModelKit source directory {ctx} does not exist or is not a directory")
    check_options(compression, layer_format)
    kf, source = load_kitfile(ctx, kitfile)
    for warning in check(kf, source):
        log.warning("%s", warning)
    sent: list[int] = []
    built = build(
        ctx,
        kf,
        _stream_sink(client, reference.repository, sent),
        parents_from=store or LocalStore(),
        compression=compression,
        layer_format=layer_format,
        modelpack=modelpack,
        progress=progress,
        on_layer=on_layer,
    )
    client.push_bytes(reference.repository, built.config)
    tags = [t for t in (reference.tag or (DEFAULT_TAG if not reference.digest else ""), *reference.extra_tags) if t]
    digest = ""
    for tag in tags or [""]:
        digest = client.put_manifest(reference.repository, tag or _digest(built.manifest), built.manifest)
    total = len(built.manifest) + built.config_descriptor.size + sum(layer.size for layer in built.layers)
    log.info("Pushed %s", digest)
    result = PackResult(digest, total, reference, built.layers, built.config_descriptor.digest, built.manifest)
    result.transferred = sum(sent) + built.config_descriptor.size
    return result


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
