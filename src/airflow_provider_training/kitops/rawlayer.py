"""``--layer-format raw`` (kit 2026): a layer that is one file stored verbatim, described by the
model-spec ``org.cncf.model.file.metadata+json`` annotation instead of a tar header.

The metadata's ``mtime`` is the Unix epoch and uid/gid are 0, as in kit's tar headers, so packing
twice gives the same manifest.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from airflow_provider_training.kitops.tarlayer import CHUNK, LayerBlob, ProgressFn, _tar_mode
from airflow_provider_training.specs.gojson import go_json

EPOCH = "1970-01-01T00:00:00Z"


class RawLayerError(ValueError):
    pass


def file_metadata(path: str, mode: int, size: int) -> str:
    """The annotation value (Go JSON of model-spec ``FileMetadata``)."""
    meta: dict[str, Any] = {
        "name": path,
        "mode": mode,
        "uid": 0,
        "gid": 0,
        "size": size,
        "mtime": EPOCH,
        "typeflag": ord("0"),
    }
    return go_json(meta).decode()


def check_raw(context: Path, layer_path: str, kind: str) -> os.stat_result:
    full = context / layer_path
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        raise RawLayerError(f"{kind} layer {layer_path}: {full} does not exist") from None
    if not stat.S_ISREG(st.st_mode):
        raise RawLayerError(
            f"{kind} layer {layer_path}: a raw layer is one regular file, and {full} is not "
            "(use --layer-format tar for directories)"
        )
    return st


def write_raw(
    context: Path, layer_path: str, kind: str, out: BinaryIO, progress: ProgressFn | None = None
) -> tuple[LayerBlob, str]:
    """Copy the file into ``out``; returns the blob and its file-metadata annotation value."""
    st = check_raw(context, layer_path, kind)
    sha = hashlib.sha256()
    size = 0
    with open(context / layer_path, "rb", buffering=0) as fh:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while n := fh.readinto(view):
            sha.update(view[:n])
            out.write(view[:n])
            size += n
            if progress:
                progress(n)
    if size != st.st_size:
        raise OSError(f"{context / layer_path} changed size while it was being packed")
    digest = "sha256:" + sha.hexdigest()
    return LayerBlob(digest, digest, size, 1), file_metadata(layer_path, _tar_mode(st.st_mode), size)
