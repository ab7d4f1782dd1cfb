"""Where container logs live and how they are written, shared by the node agent (writer) and the
pod ``log`` endpoint (reader).

Layout: ``<home>/logs/<namespace>/<pod>/<container>/<restart>.log``, one file per container start
(restart 0, 1, …), so ``previous`` is the file before the newest. Each line is
``<RFC 3339 UTC timestamp with nanoseconds> <text>`` like the kubelet's CRI log files, which is what
``timestamps``, ``sinceSeconds`` and ``sinceTime`` are answered from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING

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
    """Appends output to a container log file, stamping each complete line."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = path.open("a", encoding="utf-8")
        self._partial = ""

    def write(self, text: str) -> None:
        data = self._partial + text
        *lines, self._partial = data.split("\n")
        for line in lines:
            self._file.write(f"{timestamp()} {line}\n")
        self._file.flush()

    def close(self) -> None:
        if self._partial:
            self._file.write(f"{timestamp()} {self._partial}\n")
            self._partial = ""
        self._file.close()


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
