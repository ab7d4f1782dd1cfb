"""Layer compression as kit writes it, and bounded decompression for unpack and diff.

kit (>= v1.15, ``--compression zstd``) compresses with ``klauspost/compress/zstd``'s default
encoder (``zstd.NewWriter(w)``): ``SpeedDefault``, CRC on, an 8 MiB window, 128 KiB blocks. Its
writer buffers the first block, so a stream that ends within 128 KiB is written by ``EncodeAll``
(frame content size present, single segment above 1 KiB) and a longer one gets a streaming frame
header (no content size, window descriptor for 8 MiB). :class:`KitZstdWriter` writes the same
frame *header* with libzstd at level 3; the compressed blocks differ from klauspost's (a different
encoder), so a zstd layer's digest differs from kit's while its diffId (the tar) is the same.

Reading is bounded: a zstd frame may not ask for more than kit's decoder allows
(``MaxWindowSize``, 512 MiB), and a compressed layer may not expand beyond
:class:`ExpansionLimit` — a decompression bomb stops with a clear error before it fills the disk.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from typing import IO, Any, Protocol

import zstandard

ZSTD_BLOCK = 128 << 10  # klauspost maxCompressedBlockSize: the writer's first buffer
ZSTD_WINDOW_LOG = 23  # klauspost encoder default window, 8 << 20
ZSTD_LEVEL = 3  # libzstd's level for klauspost's SpeedDefault ("roughly zstd level 3")
ZSTD_MAX_WINDOW = 1 << 29  # klauspost decoder MaxWindowSize
MAX_EXPANSION_SETTING = "AIRFLOW_TRAINING_KIT_MAX_EXPANSION"


class _Sink(Protocol):
    def write(self, data: bytes | memoryview, /) -> object: ...


class DecompressionBombError(ValueError):
    """A compressed layer expands beyond the unpack limit."""


class KitZstdWriter:
    """zstd with the frame header klauspost's ``NewWriter`` defaults produce (module docstring)."""

    def __init__(self, out: _Sink) -> None:
        self._out = out
        self._head = bytearray()
        self._stream: Any = None

    def write(self, data: bytes | memoryview) -> None:
        if self._stream is not None:
            chunk = self._stream.compress(bytes(data))
            if chunk:
                self._out.write(chunk)
            return
        self._head += data
        if len(self._head) >= ZSTD_BLOCK:  # klauspost encodes a block only once 128 KiB are filled
            params = zstandard.ZstdCompressionParameters.from_level(
                ZSTD_LEVEL, window_log=ZSTD_WINDOW_LOG, write_checksum=True, write_content_size=False
            )
            self._stream = zstandard.ZstdCompressor(compression_params=params).compressobj()
            head, self._head = bytes(self._head), bytearray()
            self.write(head)

    def close(self) -> None:
        if self._stream is not None:
            self._out.write(self._stream.flush())
            return
        data = bytes(self._head)
        if len(data) > 1024:
            # EncodeAll: content size, single segment (window >= size)
            params = zstandard.ZstdCompressionParameters.from_level(
                ZSTD_LEVEL, write_checksum=True, write_content_size=True
            )
            self._out.write(zstandard.ZstdCompressor(compression_params=params).compress(data))
            return
        # EncodeAll at or below 1 KiB: window 1 << bits.Len(size), not single segment, yet the content
        # size is written from 256 bytes on — a header libzstd never writes, so it is set here
        # (the frame header is outside the checksum; the blocks fit the window either way)
        params = zstandard.ZstdCompressionParameters.from_level(
            ZSTD_LEVEL, window_log=max(10, len(data).bit_length()), write_checksum=True, write_content_size=False
        )
        stream = zstandard.ZstdCompressor(compression_params=params).compressobj()
        frame = stream.compress(data) + stream.flush()
        if len(data) >= 256:
            size = (len(data) - 256).to_bytes(2, "little")
            frame = frame[:4] + bytes([frame[4] | 1 << 6]) + frame[5:6] + size + frame[6:]
        self._out.write(frame)


@dataclass(frozen=True)
class ExpansionLimit:
    """How far a compressed layer may expand: ``ratio`` times its compressed size, but never less
    than ``floor`` bytes (small layers of text or zeros legitimately compress very well)."""

    ratio: int = 2000
    floor: int = 4 << 30

    def bytes_for(self, compressed_size: int) -> int:
        return max(self.floor, self.ratio * max(compressed_size, 0))

    @classmethod
    def from_env(cls) -> ExpansionLimit:
        """``$AIRFLOW_TRAINING_KIT_MAX_EXPANSION`` = ``RATIO`` or ``RATIO:FLOOR_BYTES``."""
        text = os.environ.get(MAX_EXPANSION_SETTING, "").strip()
        if not text:
            return cls()
        try:
            ratio, _, floor = text.partition(":")
            return cls(int(ratio), int(floor) if floor else cls.floor)
        except ValueError:
            raise ValueError(
                f"{MAX_EXPANSION_SETTING}={text!r} is not RATIO or RATIO:FLOOR_BYTES (e.g. 2000:4294967296)"
            ) from None


class _Bounded:
    """Counts decompressed bytes and stops past ``limit``."""

    def __init__(self, inner: Any, limit: int, what: str) -> None:
        self._inner = inner
        self._limit = limit
        self._what = what
        self.total = 0

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            return b"".join(iter(lambda: self.read(1 << 20), b""))
        data: bytes = self._inner.read(n)
        self.total += len(data)
        if self.total > self._limit:
            raise DecompressionBombError(
                f"{self._what} expands to more than {self._limit} bytes; refusing what looks like a "
                f"decompression bomb (raise {MAX_EXPANSION_SETTING}=RATIO:FLOOR_BYTES if it is genuine)"
            )
        return data

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close:
            close()


def open_decompressed(
    fh: IO[bytes] | Any, compression: str, compressed_size: int, what: str, limit: ExpansionLimit | None = None
) -> Any:
    """A reader of the uncompressed bytes of a ``none``/``gzip``/``zstd`` layer read from ``fh``,
    bounded by ``limit`` (default: :meth:`ExpansionLimit.from_env`); ``what`` names the layer."""
    if compression == "none":
        return fh
    bound = (limit or ExpansionLimit.from_env()).bytes_for(compressed_size)
    if compression.startswith("gzip"):
        return _Bounded(gzip.GzipFile(fileobj=fh, mode="rb"), bound, what)
    if compression == "zstd":
        reader = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW).stream_reader(fh, closefd=False)
        return _Bounded(reader, bound, what)
    raise ValueError(f"{what} has compression {compression!r}, which kit does not write (gzip, zstd or none)")
