"""Unpack a ModelKit from the local store into a directory, with filters and path safety.

Every tar entry must be a relative path without ``..`` that stays inside the target after resolving
symlinks already on disk; links and device entries in a layer are refused (kit never writes them).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.reference import DEFAULT_TAG, Reference, parse
from airflow_provider_training.kitops.store import LocalStore
from airflow_provider_training.specs.kitfile import Kitfile

FILTERS = ("kitfile", "model", "datasets", "code", "docs", "prompts")
# media-type base type -> filter name
_FILTER_OF = {"model": "model", "modelpart": "model", "dataset": "datasets", "code": "code", "docs": "docs"}


class UnsafePathError(ValueError):
    pass


class UnpackError(RuntimeError):
    pass


@dataclass
class UnpackResult:
    directory: Path
    files: int
    layers: int


def _safe_target(root: Path, name: str) -> Path:
    if not name or name.startswith("/") or os.path.isabs(name):
        raise UnsafePathError(f"refusing absolute path {name!r} in ModelKit layer")
    norm = posixpath.normpath(name)
    if norm == ".." or norm.startswith("../") or ".." in name.split("/"):
        raise UnsafePathError(f"refusing path {name!r} that leaves the unpack directory")
    target = root / norm
    real_root = os.path.realpath(root)
    real_parent = os.path.realpath(target.parent)
    if os.path.commonpath([real_root, real_parent]) != real_root:
        raise UnsafePathError(f"refusing path {name!r}: a symlink on disk leads outside {root}")
    if target.is_symlink():
        raise UnsafePathError(f"refusing to write through symlink {target}")
    return target


def _open_layer(fh: IO[bytes], media_type: str) -> tarfile.TarFile:
    _, fmt, compression = mediatypes.parse_layer_media_type(media_type)
    if fmt != "tar":
        raise UnpackError(f"layer format {fmt} is not supported yet")
    if compression == "zstd":
        import zstandard

        return tarfile.open(fileobj=zstandard.ZstdDecompressor().stream_reader(fh), mode="r|")
    return tarfile.open(fileobj=fh, mode="r|gz" if compression.startswith("gzip") else "r|")


def extract_layer(fh: IO[bytes], media_type: str, root: Path, overwrite: bool, ignore_existing: bool) -> int:
    files = 0
    with _open_layer(fh, media_type) as tar:
        for member in tar:
            target = _safe_target(root, member.name)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                os.chmod(target, (member.mode & 0o7777) | 0o700)
                continue
            if not member.isfile():
                raise UnsafePathError(f"refusing {member.name!r}: links and special files are not allowed")
            if target.exists():
                if ignore_existing:
                    continue
                if not overwrite:
                    raise UnpackError(f"{target} already exists (use overwrite to replace it)")
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(member)
            assert src is not None
            tmp = target.with_name(f".{target.name}.unpack")
            with open(tmp, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            os.chmod(tmp, member.mode & 0o7777)
            os.replace(tmp, target)
            files += 1
    return files


def unpack(
    store: LocalStore,
    ref: Reference,
    directory: str | Path,
    filters: Iterable[str] = (),
    overwrite: bool = False,
    ignore_existing: bool = False,
    _hops: int = 0,
) -> UnpackResult:
    """Unpack ``ref`` into ``directory``; ``filters`` limits to some of :data:`FILTERS` (default all)."""
    wanted = set(filters) or set(FILTERS)
    unknown = wanted - set(FILTERS)
    if unknown:
        raise ValueError(f"unknown unpack filter(s) {sorted(unknown)}; use {', '.join(FILTERS)}")
    root = Path(directory).absolute()
    root.mkdir(parents=True, exist_ok=True)
    desc = store.resolve(ref)
    manifest = store.read_manifest(desc)
    config = Kitfile.from_config_json(store.read_blob(manifest["config"]["digest"]), str(ref))
    files = layers = 0
    parent = config.model_reference()
    if parent and "model" in wanted and _hops < 10:
        sub = unpack(
            store,
            parse(parent, default_tag=DEFAULT_TAG),
            root,
            ["model"],
            overwrite,
            ignore_existing,
            _hops + 1,
        )
        files, layers = sub.files, sub.layers
    if "kitfile" in wanted and _hops == 0:
        _write_kitfile(root / "Kitfile", config, overwrite)
    for layer in manifest.get("layers") or []:
        base, _, _ = mediatypes.parse_layer_media_type(layer["mediaType"])
        subtype = (layer.get("annotations") or {}).get(mediatypes.ANNOTATION_SUBTYPE)
        name = "prompts" if subtype == "prompt" else _FILTER_OF.get(base, base)
        if name not in wanted:
            continue
        with store.open_blob(layer["digest"]) as fh:
            files += extract_layer(fh, layer["mediaType"], root, overwrite, ignore_existing)
        layers += 1
    return UnpackResult(root, files, layers)


def _write_kitfile(path: Path, config: Kitfile, overwrite: bool) -> None:
    text = config.to_yaml()
    if path.exists() and path.read_text() != text and not overwrite:
        raise UnpackError(f"{path} exists and differs from the ModelKit's Kitfile (use overwrite)")
    path.write_text(text)


def describe(manifest: dict[str, Any]) -> list[str]:
    return [layer["mediaType"] for layer in manifest.get("layers") or []]
