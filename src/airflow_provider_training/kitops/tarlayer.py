"""Layer tars byte-identical to kit's (``kitops.md`` §2.6), streamed through hashers and a compressor.

Python's ``tarfile`` differs from Go's ``archive/tar`` in a dozen details (trailing ``/`` on
directories, devmajor/devminor filling, prefix splitting, PAX naming, record padding), so headers are
written by hand. Files are read in chunks and never held in memory.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, Protocol

from airflow_provider_training.kitops.compression import KitZstdWriter
from airflow_provider_training.kitops.ignore import Ignore

Compression = Literal["none", "gzip", "gzip-fastest", "zstd"]
COMPRESSIONS: tuple[str, ...] = ("none", "gzip", "gzip-fastest", "zstd")
BLOCK = 512
CHUNK = 1 << 20
_NAME, _PREFIX = 100, 155
_OCTAL_SIZE_MAX = 8**11 - 1
ProgressFn = Callable[[int], None]


class _Sink(Protocol):
    def write(self, data: bytes | memoryview, /) -> object: ...


# --------------------------------------------------------------------------------------------------
# walking
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    name: str  # tar name: relative, "/" separated, no "./", no trailing "/"
    path: Path
    is_dir: bool
    mode: int
    size: int


def _same_tree(layer: str, p: str) -> bool:
    # Go: filepath.Rel both ways, skipped only when both results contain ".." (substring test)
    return not (".." in _rel(layer, p) and ".." in _rel(p, layer))


def _rel(base: str, target: str) -> str:
    b = [] if base == "." else base.split("/")
    t = [] if target == "." else target.split("/")
    i = 0
    while i < len(b) and i < len(t) and b[i] == t[i]:
        i += 1
    parts = [".."] * (len(b) - i) + t[i:]
    return "/".join(parts) or "."


def walk_layer(context: Path, layer_path: str, ignore: Ignore) -> Iterator[Entry]:
    """Entries of one layer in kit's order: Go ``filepath.Walk`` from the context root (byte order,
    Lstat, no symlinks), ancestors of the layer path included, ignore rules applied."""

    prune_ignored = not ignore.has_exclusions

    def visit(rel: str) -> Iterator[Entry]:
        full = context / rel if rel != "." else context
        try:
            names = sorted(os.listdir(full), key=lambda n: n.encode("utf-8", "surrogateescape"))
        except OSError as exc:
            raise OSError(f"cannot read directory {full}: {exc.strerror}") from exc
        for name in names:
            child = name if rel == "." else f"{rel}/{name}"
            st = os.lstat(context / child)
            is_dir = stat.S_ISDIR(st.st_mode)
            if not _same_tree(layer_path, child):
                continue
            if ignore.matches(child, layer_path):
                if is_dir and not prune_ignored:
                    yield from visit(child)
                continue
            if not is_dir and not stat.S_ISREG(st.st_mode):
                continue  # symlinks, sockets, devices: kit skips them
            yield Entry(child, context / child, is_dir, _tar_mode(st.st_mode), 0 if is_dir else st.st_size)
            if is_dir:
                yield from visit(child)

    yield from visit(".")


def _tar_mode(mode: int) -> int:
    # Go's FileInfoHeader keeps permission bits plus setuid/setgid/sticky as c_ISUID etc.
    out = mode & 0o777
    if mode & stat.S_ISUID:
        out |= 0o4000
    if mode & stat.S_ISGID:
        out |= 0o2000
    if mode & stat.S_ISVTX:
        out |= 0o1000
    return out


# --------------------------------------------------------------------------------------------------
# headers
# --------------------------------------------------------------------------------------------------


def _octal(width: int, value: int) -> bytes:
    digits = format(value, "o")
    return digits.rjust(width - 1, "0").encode("ascii") + b"\0"


def _field(value: bytes, width: int) -> bytes:
    return value[:width].ljust(width, b"\0")


def _checksum(block: bytearray) -> None:
    block[148:156] = b" " * 8
    total = sum(block)
    block[148:155] = _octal(7, total)
    block[155:156] = b" "


def _split_ustar(name: str) -> tuple[str, str] | None:
    raw = name
    if len(raw) <= _NAME or not raw.isascii():
        return None
    length = len(raw)
    if length > _PREFIX + 1:
        length = _PREFIX + 1
    elif raw[length - 1] == "/":
        length -= 1
    i = raw.rfind("/", 0, length)
    nlen = len(raw) - i - 1
    if i <= 0 or nlen > _NAME or nlen == 0 or i > _PREFIX:
        return None
    return raw[:i], raw[i + 1 :]


def _ascii(s: str) -> bytes:
    return "".join(c for c in s if ord(c) < 0x80).encode("ascii")


def _pax_record(key: str, value: str) -> bytes:
    # Go's formatPAXRecord: the length prefix counts itself; one adjustment step suffices
    tail = f" {key}={value}\n".encode()
    size = len(tail) + len(str(len(tail)))
    record = str(size).encode() + tail
    if len(record) != size:
        record = str(len(record)).encode() + tail
    return record


def header_blocks(entry: Entry) -> bytes:
    """The header block(s) Go's ``tar.Writer`` writes for kit's sanitized header."""
    typeflag = b"5" if entry.is_dir else b"0"
    split = _split_ustar(entry.name)
    pax: list[tuple[str, str]] = []
    fits_name = entry.name.isascii() and (len(entry.name.encode()) <= _NAME or split is not None)
    if not fits_name:
        pax.append(("path", entry.name))
    if entry.size > _OCTAL_SIZE_MAX:
        pax.append(("size", str(entry.size)))
    out = bytearray()
    if pax:
        data = b"".join(_pax_record(k, v) for k, v in sorted(pax))
        parent, base = entry.name.rsplit("/", 1) if "/" in entry.name else ("", entry.name)
        pax_name = _ascii((parent + "/" if parent else "") + "PaxHeaders.0/" + base)[:_NAME].rstrip(b"/")
        blk = bytearray(BLOCK)
        blk[0:100] = _field(pax_name, 100)
        blk[100:108] = _octal(8, 0)
        blk[108:116] = _octal(8, 0)
        blk[116:124] = _octal(8, 0)
        blk[124:136] = _octal(12, len(data))
        blk[136:148] = _octal(12, 0)
        blk[156:157] = b"x"
        blk[257:263] = b"ustar\0"
        blk[263:265] = b"00"
        _checksum(blk)
        out += blk + data + b"\0" * (-len(data) % BLOCK)
        name, prefix = _ascii(entry.name), b""
    elif split is not None:
        prefix, name = split[0].encode(), split[1].encode()
    else:
        name, prefix = entry.name.encode(), b""
    blk = bytearray(BLOCK)
    blk[0:100] = _field(name, 100)
    blk[100:108] = _octal(8, entry.mode)
    blk[108:116] = _octal(8, 1000)
    blk[116:124] = _octal(8, 0)
    blk[124:136] = _octal(12, entry.size if entry.size <= _OCTAL_SIZE_MAX else 0)
    blk[136:148] = _octal(12, 0)
    blk[156:157] = typeflag
    blk[257:263] = b"ustar\0"
    blk[263:265] = b"00"
    blk[329:337] = _octal(8, 0)
    blk[337:345] = _octal(8, 0)
    blk[345:500] = _field(prefix, 155)
    _checksum(blk)
    out += blk
    return bytes(out)


# --------------------------------------------------------------------------------------------------
# streaming output
# --------------------------------------------------------------------------------------------------


class _GoGzip:
    """gzip framing as Go's ``compress/gzip`` writes it (mtime 0, no name, OS 255)."""

    def __init__(self, out: _Sink, level: int) -> None:
        self._out = out
        self._z = zlib.compressobj(level, zlib.DEFLATED, -15, 8)
        self._crc = 0
        self._size = 0
        xfl = 4 if level == 1 else 2 if level == 9 else 0
        out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + bytes([xfl, 255]))

    def write(self, data: bytes | memoryview) -> None:
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        chunk = self._z.compress(data)
        if chunk:
            self._out.write(chunk)

    def close(self) -> None:
        self._out.write(self._z.flush())
        self._out.write(struct.pack("<II", self._crc & 0xFFFFFFFF, self._size & 0xFFFFFFFF))


class _HashingFile:
    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        self.sha.update(data)
        self.size += len(data)
        self.fh.write(data)


@dataclass(frozen=True)
class LayerBlob:
    digest: str  # sha256 of the stored bytes
    diff_id: str  # sha256 of the uncompressed tar
    size: int
    file_count: int


def write_layer(
    context: Path,
    layer_path: str,
    ignore: Ignore,
    out: BinaryIO,
    compression: str = "none",
    progress: ProgressFn | None = None,
) -> LayerBlob:
    """Tar one layer into ``out``; returns its digest, diffId and size."""
    stored = _HashingFile(out)
    sink: _GoGzip | KitZstdWriter | None
    if compression == "none":
        sink = None
    elif compression == "gzip":
        sink = _GoGzip(stored, 6)
    elif compression == "gzip-fastest":
        sink = _GoGzip(stored, 1)
    elif compression == "zstd":
        sink = KitZstdWriter(stored)
    else:
        raise ValueError(f"compression {compression!r} is not one of {', '.join(COMPRESSIONS)}")
    raw_sha = hashlib.sha256() if sink is not None else stored.sha

    def emit(data: bytes | memoryview) -> None:
        if sink is None:
            stored.write(data)
        else:
            raw_sha.update(data)
            sink.write(data)

    buf = bytearray(CHUNK)
    view = memoryview(buf)
    files = 0
    for entry in walk_layer(context, layer_path, ignore):
        emit(header_blocks(entry))
        if entry.is_dir:
            continue
        files += 1
        remaining = entry.size
        with open(entry.path, "rb", buffering=0) as fh:
            while remaining > 0:
                n = fh.readinto(view[: min(CHUNK, remaining)])
                if not n:
                    raise OSError(f"{entry.path} shrank while it was being packed")
                emit(view[:n])
                remaining -= n
                if progress:
                    progress(n)
        pad = -entry.size % BLOCK
        if pad:
            emit(b"\0" * pad)
    emit(b"\0" * (2 * BLOCK))
    if sink is not None:
        sink.close()
    return LayerBlob(
        digest="sha256:" + stored.sha.hexdigest(),
        diff_id="sha256:" + raw_sha.hexdigest(),
        size=stored.size,
        file_count=files,
    )
