"""Where container logs live and how they are written, shared by the node agent (writer) and the
pod ``log`` endpoint (reader).

Layout: ``<home>/logs/<namespace>/<pod>/<container>/<restart>.log``, one file per container start
(restart 0, 1, …), so ``previous`` is the file before the newest. Each line is
``<RFC 3339 UTC timestamp with nanoseconds> <text>`` like the kubelet's CRI log files, which is what
``timestamps``, ``sinceSeconds`` and ``sinceTime`` are answered from.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the supervisor loads this module by path, without the package (fast start)
    from airflow_provider_training.embedded.paths import Home


def container_log_dir(home: Home, namespace: str, pod: str, container: str) -> Path:
    return home.logs / namespace / pod / container


def log_path(home: Home, namespace: str, pod: str, container: str, restart: int) -> Path:
    return container_log_dir(home, namespace, pod, container) / f"{restart}.log"


def restarts(directory: Path) -> list[int]:
    """The restart numbers that have a log file, oldest first."""
    if not directory.is_dir():
        return []
    return sorted(int(p.stem) for p in directory.glob("*.log") if p.stem.isdigit())


def timestamp(moment: datetime | None = None) -> str:
    moment = moment or datetime.now(timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def parse_timestamp(text: str) -> datetime | None:
    try:
        return datetime.strptime(text[:26], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


class LogWriter:
    """Appends output to a container log file, stamping each complete line.

    A write that fails (the disk is full) never stops the container or its supervisor: the output
    is dropped and counted, and once a write succeeds again (tried at most once a second) the log
    gets a line saying how much was lost, as the kubelet's log rotation notes what it dropped."""

    RETRY_INTERVAL = 1.0

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd = -1
        self._open()
        self._partial = ""
        self._dropped = 0  # bytes of output lost since the last successful write
        self._retry_at = 0.0
        self._midline = False  # a failed write left half a line in the file

    @property
    def dropped(self) -> int:
        return self._dropped

    def write(self, text: str) -> None:
        data = self._partial + text
        *lines, self._partial = data.split("\n")
        if lines:
            self._emit("".join(f"{timestamp()} {line}\n" for line in lines).encode("utf-8", "replace"))

    def _emit(self, data: bytes) -> None:
        now = time.monotonic()
        if self._dropped and now < self._retry_at:
            self._dropped += len(data)
            return
        if self._dropped:
            note = ("\n" if self._midline else "") + (
                f"{timestamp()} [log truncated: {self._dropped} bytes of output were dropped while the disk was full]\n"
            )
            if not self._write_all(note.encode()):
                self._dropped += len(data)
                self._retry_at = now + self.RETRY_INTERVAL
                return
            self._dropped, self._midline = 0, False
        if not self._write_all(data):
            self._dropped += len(data)
            self._retry_at = now + self.RETRY_INTERVAL

    def _open(self) -> bool:
        """Open the file if it is not open yet; False while that fails (no room for it either)."""
        if self._fd < 0:
            try:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            except OSError:
                return False
        return True

    def _write_all(self, data: bytes) -> bool:
        if not self._open():
            return False
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except InterruptedError:
                continue
            except OSError:
                self._midline = self._midline or len(view) < len(data)
                return False
            view = view[written:]
        return True

    def close(self) -> None:
        if self._partial:
            self._emit(f"{timestamp()} {self._partial}\n".encode("utf-8", "replace"))
            self._partial = ""
        if self._dropped:
            self._retry_at = 0.0
            self._emit(b"")
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@dataclass(frozen=True)
class LogLine:
    time: datetime | None
    stamp: str
    text: str  # including the trailing newline

    @classmethod
    def parse(cls, raw: str) -> LogLine:
        stamp, sep, text = raw.partition(" ")
        moment = parse_timestamp(stamp) if sep else None
        if moment is None:  # not written by LogWriter: serve the line as it is
            return cls(None, "", raw if raw.endswith("\n") else raw + "\n")
        return cls(moment, stamp, text if text.endswith("\n") else text + "\n")

    def render(self, timestamps: bool) -> str:
        return f"{self.stamp} {self.text}" if timestamps and self.stamp else self.text
