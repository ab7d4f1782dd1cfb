"""``limits.memory`` for a container process tree.

Where the kernel offers a cgroup-v1 memory controller this process may write to, each container
start gets its own cgroup with ``memory.limit_in_bytes`` (the kernel's OOM killer does the rest and
``memory.oom_control`` says it did). Elsewhere the supervisor samples the resident memory of the
container's process group from ``/proc`` every 100 ms and kills the group with SIGKILL when it is
over the limit. Without ``/proc`` (macOS) the limit is not enforced; the node agent says so in an
event. Standard library only (imported by the supervisor).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

POLL_INTERVAL = 0.1
_V1_ROOT = Path("/sys/fs/cgroup/memory")


def _own_v1_cgroup() -> Path | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):
                candidate = _V1_ROOT / path.lstrip("/")
                return candidate if candidate.is_dir() else _V1_ROOT
    return None


def cgroup_parent() -> Path | None:
    """A directory under which this process can create memory cgroups, or None."""
    own = _own_v1_cgroup()
    if own is None:
        return None
    parent = own / "airflow-training"
    try:
        parent.mkdir(exist_ok=True)
        probe = parent / f"probe-{os.getpid()}"
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return None
    return parent


def mechanism() -> str:
    if cgroup_parent() is not None:
        return "cgroup"
    if Path("/proc/self/status").exists():
        return "sampling"
    return "none"


def _group_rss(pgid: int) -> int:
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            for line in Path(entry.path, "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    break
        except (OSError, ValueError):
            continue
    return total


class Limiter:
    def __init__(self, limit: int, cgroup: Path | None) -> None:
        self.limit = limit
        self.cgroup = cgroup

    @classmethod
    def create(cls, limit: int | None, name: str) -> Limiter | None:
        if not limit:
            return None
        parent = cgroup_parent()
        if parent is not None:
            group = parent / name
            with contextlib.suppress(OSError):
                group.mkdir(exist_ok=True)
                (group / "memory.limit_in_bytes").write_text(str(limit))
                with contextlib.suppress(OSError):
                    (group / "memory.memsw.limit_in_bytes").write_text(str(limit))
                return cls(limit, group)
        return cls(limit, None) if Path("/proc/self/status").exists() else None

    @property
    def needs_polling(self) -> bool:
        return self.cgroup is None

    def join_self(self) -> None:
        """In the container's process before exec: enter the cgroup."""
        if self.cgroup is not None:
            (self.cgroup / "cgroup.procs").write_text("0")

    def over(self, pgid: int) -> bool:
        return self.cgroup is None and _group_rss(pgid) > self.limit

    def oom_killed(self) -> bool:
        if self.cgroup is None:
            return False
        with contextlib.suppress(OSError, ValueError):
            for line in (self.cgroup / "memory.oom_control").read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1]) > 0
        return False

    def release(self) -> None:
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                self.cgroup.rmdir()
