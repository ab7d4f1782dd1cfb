"""Unpack a ModelKit or ModelPack from the local store into a directory, with filters and path safety.

Every tar entry must be a relative path without ``..`` that stays inside the target after resolving
symlinks already on disk; links and device entries in a layer are refused (kit never writes them).

A layer is unpacked all or nothing: its files are written as ``.<name>.unpack`` temp files next to
their targets and renamed into place only after the whole layer was read and its digest matched.
A corrupt, truncated or mislabelled layer, or a full disk, therefore fails with one line naming the
layer digest (and the file being written), removes the temp files and the directories it created,
and leaves every file the user already had untouched.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import hashlib
import json
import os
import posixpath
import shutil
import tarfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import zstandard

from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.compression import DecompressionBombError, ExpansionLimit, open_decompressed
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.modelpack import read_kitfile
from airflow_provider_training.kitops.reference import DEFAULT_TAG, Reference, parse
from airflow_provider_training.specs.kitfile import Kitfile

FILTERS = ("kitfile", "model", "datasets", "code", "docs", "prompts")
# media-type base type -> filter name
_FILTER_OF = {"model": "model", "modelpart": "model", "dataset": "datasets", "code": "code", "docs": "docs"}
TEMP_SUFFIX = ".unpack"


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


class _Hashing:
    """A read-only stream that hashes what passes through it (to check the layer digest)."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh
        self.sha = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self.sha.update(data)
        return data

    def drain(self) -> None:
        while self.read(1 << 20):
            pass


def _open_layer(fh: Any, layer: dict[str, Any], limit: ExpansionLimit | None) -> tarfile.TarFile:
    _, _, compression = mediatypes.parse_layer_media_type(layer["mediaType"])
    what = f"layer {layer.get('digest') or layer['mediaType']}"
    size = layer.get("size")
    stream = open_decompressed(fh, compression, size if isinstance(size, int) else 0, what, limit)
    return tarfile.open(fileobj=stream, mode="r|")


@dataclass
class _Staged:
    """Temp files of one layer waiting to be renamed, and directories the layer created."""

    files: list[tuple[Path, Path]] = field(default_factory=list)  # (temp, target)
    new_dirs: list[Path] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)  # entry name -> "file" / "dir", to find conflicts

    def claim(self, name: str, kind: str, digest: str) -> None:
        """Plain duplicates are last-wins (as tar and kit); a name that is a file and a directory at
        once cannot be unpacked, so the layer is refused before anything is renamed."""
        norm = posixpath.normpath(name)
        parts = norm.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if self.kinds.get(parent) == "file":
                raise UnpackError(
                    f"layer {digest} has {name!r} under {parent!r}, which it also holds as a file; "
                    "nothing from it was written — repack the ModelKit"
                )
        if self.kinds.setdefault(norm, kind) != kind:
            raise UnpackError(
                f"layer {digest} holds {name!r} both as a file and as a directory; "
                "nothing from it was written — repack the ModelKit"
            )

    def mkdir(self, path: Path) -> None:
        missing = []
        p = path
        while not p.exists():
            missing.append(p)
            p = p.parent
        path.mkdir(parents=True, exist_ok=True)
        self.new_dirs.extend(reversed(missing))

    def discard(self) -> None:
        for tmp, _ in self.files:
            tmp.unlink(missing_ok=True)
        for d in reversed(self.new_dirs):
            with contextlib.suppress(OSError):  # not empty: something else lives there now
                d.rmdir()

    def commit(self) -> int:
        for tmp, target in self.files:
            os.replace(tmp, target)
        return len(self.files)


def _stage_file(staged: _Staged, src: IO[bytes], target: Path, mode: int) -> None:
    staged.mkdir(target.parent)
    tmp = target.with_name(f".{target.name}{TEMP_SUFFIX}")
    if (tmp, target) not in staged.files:  # a duplicate entry overwrites the temp file: last wins
        staged.files.append((tmp, target))
    with open(tmp, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    os.chmod(tmp, mode & 0o7777)


def _exists(target: Path, overwrite: bool, ignore_existing: bool) -> bool:
    """True when an existing target is to be kept (``ignore_existing``); raises when it may not be
    replaced."""
    if not target.exists():
        return False
    if ignore_existing:
        return True
    if not overwrite:
        raise UnpackError(f"{target} already exists (use overwrite to replace it)")
    return False


def _describe_corruption(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def extract_layer(
    fh: IO[bytes],
    layer: dict[str, Any] | str,
    root: Path,
    overwrite: bool,
    ignore_existing: bool,
    raw_path: str | None = None,
    limit: ExpansionLimit | None = None,
) -> int:
    """Unpack one layer (its descriptor, or just its media type) read from ``fh``; all or nothing
    (module docstring); the digest is checked when the descriptor has one, and a compressed layer
    may expand no further than ``limit`` (default :meth:`ExpansionLimit.from_env`)."""
    if isinstance(layer, str):
        layer = {"mediaType": layer}
    media_type = layer["mediaType"]
    digest = str(layer.get("digest", ""))
    _, layer_format, _ = mediatypes.parse_layer_media_type(media_type)
    staged = _Staged()
    reader = _Hashing(fh)
    current = ""
    try:
        if layer_format == "raw":
            current = _raw_name(layer, raw_path)
            target = _safe_target(root, current)
            if not _exists(target, overwrite, ignore_existing):
                raw = tarfile.TarInfo(current)
                raw.mode = _raw_mode(layer)
                mode = _data_filtered(raw, root, digest).mode
                _stage_file(staged, reader, target, mode)  # type: ignore[arg-type]
        else:
            with _open_layer(reader, layer, limit) as tar:
                for member in tar:
                    current = member.name
                    target = _safe_target(root, member.name)
                    if not (member.isdir() or member.isfile()):
                        raise UnsafePathError(f"refusing {member.name!r}: links and special files are not allowed")
                    member = _data_filtered(member, root, digest)
                    staged.claim(member.name, "dir" if member.isdir() else "file", digest)
                    if member.isfile() and target.is_dir() and not target.is_symlink():
                        raise UnpackError(
                            f"cannot unpack {member.name!r} of layer {digest}: {target} is a directory; "
                            "nothing from this layer was written — move it aside"
                        )
                    if member.isdir():
                        staged.mkdir(target)  # data_filter keeps no directory mode: the umask's applies
                        continue
                    if _exists(target, overwrite, ignore_existing):
                        continue
                    src = tar.extractfile(member)
                    assert src is not None
                    _stage_file(staged, src, target, member.mode)
        current = ""
        reader.drain()
        actual = "sha256:" + reader.sha.hexdigest()
        if digest.startswith("sha256:") and actual != digest:
            raise UnpackError(
                f"layer {digest} does not match its digest (got {actual}): the blob is corrupted; "
                "nothing from it was written — pull the ModelKit again"
            )
    except (tarfile.TarError, EOFError, zlib.error, zstandard.ZstdError, OSError, ValueError) as exc:
        staged.discard()
        if isinstance(exc, (UnsafePathError, UnpackError)):
            raise
        if isinstance(exc, DecompressionBombError):
            raise UnpackError(f"{exc}; nothing from it was written") from None
        where = f" while writing {current}" if current else ""
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise UnpackError(
                f"not enough disk space in {root} to unpack layer {digest}{where}; nothing from this layer "
                "was written — free space or unpack elsewhere"
            ) from None
        if isinstance(exc, OSError) and exc.errno is not None:
            raise UnpackError(f"cannot unpack layer {digest}{where}: {exc.strerror} ({exc.filename})") from None
        raise UnpackError(
            f"layer {digest} ({media_type}) is corrupt or truncated{where}: {_describe_corruption(exc)}; "
            "nothing from it was written — pull the ModelKit again"
        ) from None
    except BaseException:
        staged.discard()
        raise
    return staged.commit()


def _data_filtered(member: tarfile.TarInfo, root: Path, digest: str) -> tarfile.TarInfo:
    """The entry as PEP 706's ``data`` filter passes it: no setuid/setgid/sticky bits, no group or
    other write, owner read/write; raw layers get the same rules as tar entries."""
    if not hasattr(tarfile, "data_filter"):
        return _data_filtered_by_hand(member)
    try:
        return tarfile.data_filter(member, str(root))
    except tarfile.FilterError as exc:
        raise UnsafePathError(f"refusing {member.name!r} in layer {digest}: {exc}") from None


def _data_filtered_by_hand(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """The ``data`` filter's mode rules where ``tarfile`` has no filters (Python before 3.11.4 /
    3.10.12: Debian bookworm's 3.11.2, the images' base). Its path and link rules are already
    ``_safe_target``'s and ``extract_layer``'s (which refuses links and special files)."""
    filtered = copy.copy(member)
    if member.isdir():
        filtered.mode = None  # type: ignore[assignment]  # (as data_filter: the umask's mode)
        return filtered
    mode = member.mode & 0o755
    mode |= 0o600
    if not mode & 0o100:
        mode &= ~0o011
    filtered.mode = mode
    return filtered


def _raw_name(layer: dict[str, Any], fallback: str | None) -> str:
    annotations = layer.get("annotations") or {}
    name = annotations.get(mediatypes.ANNOTATION_FILEPATH) or fallback
    if not name:
        raise UnpackError(f"raw layer {layer.get('digest')} names no file ({mediatypes.ANNOTATION_FILEPATH})")
    return str(name)


def _raw_mode(layer: dict[str, Any]) -> int:
    meta = (layer.get("annotations") or {}).get(mediatypes.ANNOTATION_FILE_METADATA)
    try:
        return int(json.loads(meta)["mode"]) if meta else 0o644
    except (ValueError, KeyError, TypeError):
        return 0o644


def unpack(
    store: LocalStore,
    ref: Reference,
    directory: str | Path,
    filters: Iterable[str] = (),
    overwrite: bool = False,
    ignore_existing: bool = False,
    _hops: int = 0,
    limit: ExpansionLimit | None = None,
) -> UnpackResult:
    """Unpack ``ref`` into ``directory``; ``filters`` limits to some of :data:`FILTERS` (default all).
    ModelKits and ModelPacks alike (the format is read from the manifest)."""
    wanted = set(filters) or set(FILTERS)
    unknown = wanted - set(FILTERS)
    if unknown:
        raise ValueError(f"unknown unpack filter(s) {sorted(unknown)}; use {', '.join(FILTERS)}")
    root = Path(directory).absolute()
    root.mkdir(parents=True, exist_ok=True)
    desc = store.resolve(ref)
    manifest = store.read_manifest(desc)
    try:
        mediatypes.validate_manifest(manifest, f"ModelKit {ref}")
    except mediatypes.MediaTypeError as exc:
        raise UnpackError(str(exc)) from None
    config = read_kitfile(manifest, store.read_blob(manifest["config"]["digest"]), str(ref))
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
            limit,
        )
        files, layers = sub.files, sub.layers
    kitfile_text = None
    if "kitfile" in wanted and _hops == 0:  # checked first, written last: a failed unpack keeps the user's
        kitfile_text = _kitfile_text(root / "Kitfile", config, overwrite)
    paths = {info.digest: path for _, _, info, path in config.layer_entries() if info.digest}
    for layer in manifest.get("layers") or []:
        base, _, _ = mediatypes.parse_layer_media_type(layer["mediaType"])
        subtype = (layer.get("annotations") or {}).get(mediatypes.ANNOTATION_SUBTYPE)
        name = "prompts" if subtype == "prompt" else _FILTER_OF.get(base, base)
        if name not in wanted:
            continue
        with store.open_blob(layer["digest"]) as fh:
            files += extract_layer(fh, layer, root, overwrite, ignore_existing, paths.get(layer["digest"]), limit)
        layers += 1
    if kitfile_text is not None:
        _write_atomically(root / "Kitfile", kitfile_text)
    return UnpackResult(root, files, layers)


def _kitfile_text(path: Path, config: Kitfile, overwrite: bool) -> str:
    text = config.to_yaml()
    if path.exists() and path.read_text() != text and not overwrite:
        raise UnpackError(f"{path} exists and differs from the ModelKit's Kitfile (use overwrite)")
    return text


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}{TEMP_SUFFIX}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UnpackError(f"cannot write {path}: {exc.strerror}") from None


def describe(manifest: dict[str, Any]) -> list[str]:
    return [layer["mediaType"] for layer in manifest.get("layers") or []]
