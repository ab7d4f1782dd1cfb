"""The life of pod supervisors, seen from the node agent: starting them (forked by the zygote, or
directly), telling a live one from a dead one (its ``supervisor.lock``), asking one to stop, and
stopping the container processes a dead one left behind (``orphans``) before the pod's fate is
decided."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from airflow_provider_training.embedded.node import isolation, orphans

log = logging.getLogger(__name__)
ENTRY = Path(__file__).with_name("entry.py")
# A supervisor forked by the zygote takes its lock within milliseconds; one that has neither written
# its state nor taken its lock after this long died before it could.
SUPERVISOR_START_GRACE = 5.0
# The longest the agent waits, after SIGTERM, before it SIGKILLs what a dead supervisor left running.
MAX_ORPHAN_GRACE = 30.0


def lock_held(path: Path) -> bool:
    try:
        with open(path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return False
    except OSError:
        return False


def alive(directory: Path) -> bool:
    """Whether the pod directory's supervisor runs (it holds its lock for its whole life)."""
    return lock_held(directory / "supervisor.lock")


def ask_to_stop(directory: Path) -> None:
    """SIGTERM the supervisor: it stops its containers (grace period, then SIGKILL) and exits."""
    with contextlib.suppress(OSError, ValueError):
        os.kill(int((directory / "supervisor.pid").read_text()), signal.SIGTERM)


def stop_orphans(directory: Path, deadline: float | None, what: str) -> tuple[bool, float | None]:
    """Stop the container processes the dead supervisor of ``directory`` left running. Returns
    (whether any still runs, the SIGKILL deadline): the first call sends SIGTERM and sets the
    deadline from the pod's grace period; a call after the deadline sends SIGKILL."""
    try:
        state = json.loads((directory / "state.json").read_text())
    except (OSError, ValueError):
        return False, deadline
    left = orphans.left_behind(state if isinstance(state, dict) else {})
    if not left:
        return False, deadline
    now = time.monotonic()
    if deadline is None:
        try:
            grace = float(json.loads((directory / "spec.json").read_text()).get("gracePeriod", 30))
        except (OSError, ValueError, TypeError, AttributeError):
            grace = MAX_ORPHAN_GRACE
        deadline = now + min(max(grace, 0.0), MAX_ORPHAN_GRACE)
        log.warning(
            "the supervisor of %s ended while %d container process(es) ran; stopping them before deciding "
            "the pod's fate (see %s)",
            what,
            len(left),
            directory / "supervisor.log",
        )
        orphans.stop(left, force=False)
    elif now >= deadline:
        orphans.stop(left, force=True)
    return True, deadline


SPARES_ENV, DEFAULT_SPARES = "AIRFLOW_TRAINING_SPARE_SUPERVISORS", 4


def spare_count() -> int:
    """``AIRFLOW_TRAINING_SPARE_SUPERVISORS``: supervisors kept forked ahead (0: none)."""
    value = os.environ.get(SPARES_ENV, str(DEFAULT_SPARES))
    try:
        return max(0, int(value))
    except ValueError:
        log.warning("%s=%r is not a whole number; keeping %d spare supervisors", SPARES_ENV, value, DEFAULT_SPARES)
        return DEFAULT_SPARES


class Supervisors:
    """Starts supervisors: through one zygote (a fork server) when it works, else one process each."""

    def __init__(
        self, node_dir: Path, premount: tuple[str, ...] = (), sandbox: isolation.Sandbox | None = None
    ) -> None:
        """``premount``: with namespace isolation, the mount paths (nearly) every pod has, which
        spare supervisors make ready in their views ahead of their pods (see ``zygote``), with
        ``sandbox``'s masks."""
        self.node_dir = node_dir
        self.use_zygote = os.environ.get("AIRFLOW_TRAINING_ZYGOTE", "1") != "0"
        self.zygote: subprocess.Popen[bytes] | None = None
        self.options = ["--spares", str(spare_count())]
        if premount:
            view_root = node_dir / "view-root"  # empty on the host: each spare mounts its own root on it
            view_root.mkdir(parents=True, exist_ok=True)
            self.options += ["--view-root", str(view_root)]
            for path in premount:
                self.options += ["--premount", path]
            self.options += (sandbox or isolation.Sandbox()).argv()

    def spawn(self, directory: Path) -> subprocess.Popen[bytes] | None:
        """Fork the pod's supervisor from the zygote (None), or start it directly (its Popen)."""
        if self.use_zygote:
            for _ in range(2):
                zygote = self._zygote()
                if zygote is None or zygote.stdin is None:
                    break
                try:
                    zygote.stdin.write(f"{directory}\n".encode())
                    zygote.stdin.flush()
                    return None
                except OSError:
                    log.warning("the supervisor zygote ended (exit code %s); starting another", zygote.poll())
                    self.zygote = None
        with open(directory / "supervisor.log", "ab") as errors:
            return subprocess.Popen(
                [sys.executable, "-I", "-S", str(ENTRY), "run", str(directory)],
                stdin=subprocess.DEVNULL,
                stdout=errors,
                stderr=errors,
                start_new_session=True,
                close_fds=True,
            )

    def warm(self) -> None:
        """Start the zygote now, so its spares are ready for the first pod, not the second."""
        if self.use_zygote:
            self._zygote()

    def _zygote(self) -> subprocess.Popen[bytes] | None:
        if self.zygote is not None and self.zygote.poll() is None:
            return self.zygote
        try:
            with open(self.node_dir / "zygote.log", "ab") as errors:
                self.zygote = subprocess.Popen(
                    [sys.executable, "-I", "-S", str(ENTRY), "zygote", *self.options],
                    stdin=subprocess.PIPE,
                    stdout=errors,
                    stderr=errors,
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError as exc:
            log.warning("cannot start the supervisor zygote (%s); starting supervisors directly", exc)
            self.use_zygote = False
            return None
        return self.zygote

    def stop_zygote(self) -> None:
        """Closing its stdin ends it; the supervisors it forked keep running."""
        zygote, self.zygote = self.zygote, None
        if zygote is None:
            return
        with contextlib.suppress(OSError):
            if zygote.stdin is not None:
                zygote.stdin.close()
        try:
            zygote.wait(timeout=2)
        except subprocess.TimeoutExpired:
            zygote.kill()
            zygote.wait()
