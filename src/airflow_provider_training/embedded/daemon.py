"""Starting, stopping and asking about the daemon of a data directory (``ensure_running``)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from airflow_provider_training.embedded import tls
from airflow_provider_training.embedded.paths import Home

log = logging.getLogger(__name__)


class DaemonError(RuntimeError):
    pass


@dataclass(frozen=True)
class ControlPlane:
    """A running control plane: what a client needs to reach it (``ca`` verifies its TLS certificate)."""

    home: Path
    api_url: str
    kubeconfig: Path
    token: str = field(repr=False)
    ca: Path = Path()
    pid: int = 0


@dataclass(frozen=True)
class DaemonStatus:
    running: bool
    ready: bool
    pid: int | None
    api_url: str | None
    kubeconfig: Path
    message: str


def _lock_held(home: Home) -> bool:
    if not home.lock.exists():
        return False
    with open(home.lock, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def _read_endpoint(home: Home) -> dict[str, object] | None:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(home.endpoint.read_text())
        if isinstance(data, dict):
            return data
    return None


def _read_pid(home: Home) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(home.pid.read_text().strip())
    return None


def _ready(h: Home, url: str, timeout: float = 1.0) -> bool:
    try:
        context = ssl.create_default_context(cafile=str(tls.paths(h).ca))
        with urllib.request.urlopen(f"{url}/readyz", timeout=timeout, context=context) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def status(home: str | os.PathLike[str] | None = None) -> DaemonStatus:
    """The truth about the daemon: the lock says whether it runs; files a crashed one left are removed."""
    h = Home.at(home)
    if not _lock_held(h):
        stale = _read_pid(h)
        if stale is not None or h.endpoint.exists():
            h.pid.unlink(missing_ok=True)
            h.endpoint.unlink(missing_ok=True)
            return DaemonStatus(
                False,
                False,
                None,
                None,
                h.kubeconfig,
                f"not running (the daemon with pid {stale} ended without cleaning up; "
                "its stale pid and endpoint files were removed)",
            )
        return DaemonStatus(False, False, None, None, h.kubeconfig, "not running")
    endpoint = _read_endpoint(h)
    pid = _read_pid(h)
    if endpoint is None or endpoint.get("pid") != pid:
        return DaemonStatus(True, False, pid, None, h.kubeconfig, "starting")
    url = str(endpoint["url"])
    if not _ready(h, url):
        return DaemonStatus(True, False, pid, url, h.kubeconfig, f"running (pid {pid}) but not answering on {url}")
    return DaemonStatus(True, True, pid, url, h.kubeconfig, f"running (pid {pid}) on {url}")


def _control_plane(h: Home, st: DaemonStatus) -> ControlPlane:
    assert st.api_url is not None
    return ControlPlane(h.root, st.api_url, h.kubeconfig, h.token.read_text().strip(), tls.paths(h).ca, st.pid or 0)


def start(
    home: str | os.PathLike[str] | None = None,
    *,
    timeout: float = 30.0,
    port: int | None = None,
    env: dict[str, str] | None = None,
) -> ControlPlane:
    """Start a detached daemon for ``home`` (or return the running one) and wait until it serves."""
    h = Home.at(home)
    current = status(h.root)
    if current.ready:
        return _control_plane(h, current)
    h.ensure()
    command = [sys.executable, "-m", "airflow_provider_training.embedded.server", "--home", str(h.root)]
    if port is not None:
        command += ["--port", str(port)]
    process: subprocess.Popen[bytes] | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # A daemon that was just killed may hold its lock a moment longer: decide on each pass.
        if not current.running:
            if process is None:
                process = _spawn(command, h, env)
            elif process.poll() is not None:
                raise DaemonError(
                    f"the control plane daemon for {h.root} exited with code {process.returncode}:\n" + _log_tail(h)
                )
        time.sleep(0.05)
        current = status(h.root)
        if current.ready:
            return _control_plane(h, current)
    raise DaemonError(f"the control plane daemon for {h.root} did not answer within {timeout:.0f}s:\n{_log_tail(h)}")


def _spawn(command: list[str], h: Home, env: dict[str, str] | None) -> subprocess.Popen[bytes]:
    with open(h.daemon_log, "ab") as log:
        # A new session and no inherited stdio: whoever ran `start` can read its output to EOF.
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env={**os.environ, **(env or {})},
            close_fds=True,
        )


def _log_tail(h: Home, lines: int = 15) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(h.daemon_log.read_text(errors="replace").splitlines()[-lines:])
    return f"(no log at {h.daemon_log})"


def stop(home: str | os.PathLike[str] | None = None, *, timeout: float = 15.0, replicas: bool = False) -> bool:
    """SIGTERM the daemon and wait for it to release its lock (SIGKILL after ``timeout``).
    Returns whether a daemon was running.

    Replicas run under supervisors that outlive the daemon on purpose (a restarted daemon adopts
    them); with ``replicas=True`` their supervisors are stopped too, and with them every container."""
    h = Home.at(home)
    try:
        if not _lock_held(h):
            status(h.root)  # clears stale files
            return False
        return _stop_daemon(h, timeout)
    finally:
        if replicas:
            stop_supervisors(h, timeout)
        elif left := running_supervisors(h.root):
            # Said, not silent: a script that starts daemons and stops them this way leaves these
            # behind (a benchmark once left 4,577, each restarting its crashed container).
            log.warning(
                "%d pod(s) of %s keep running under their supervisors until a daemon started on it adopts "
                "them; `airflow-training embedded stop --all` (stop(home, replicas=True)) stops them",
                len(left),
                h.root,
            )


def running_supervisors(home: str | os.PathLike[str] | None = None) -> list[int]:
    """The pids of the pod supervisors of ``home`` that run (each keeps its pod's containers going
    and restarting while no daemon runs, until a daemon adopts or stops it)."""
    pids = []
    for state in sorted((Home.at(home).root / "node" / "pods").glob("*/state.json")):
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            pid = int(json.loads(state.read_text()).get("supervisor"))
            if _is_supervisor(pid):
                pids.append(pid)
    return pids


def stop_supervisors(h: Home, timeout: float = 15.0) -> int:
    """SIGTERM every pod supervisor recorded under ``<home>/node/pods`` (they stop their containers
    and exit); SIGKILL those still there after ``timeout``. Returns how many were signalled."""
    pids = []
    for pid in running_supervisors(h.root):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            pids.append(pid)
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return len(pids)


def _is_supervisor(pid: int) -> bool:
    """A recorded pid may have been reused: only signal a process that runs our node entry point."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return _alive(pid) and not Path("/proc/self").exists()  # no /proc (macOS): trust the record
    return b"entry.py" in cmdline


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours is not alive
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (OSError, IndexError):
        return True


def _stop_daemon(h: Home, timeout: float) -> bool:
    pid = _read_pid(h)
    if pid is None:
        raise DaemonError(f"a daemon holds {h.lock} but wrote no pid file {h.pid}; stop it by hand")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _lock_held(h):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
        time.sleep(0.05)
    return True


def ensure_running(home: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None) -> ControlPlane:
    """The control plane of ``home`` (``--home`` / ``$AIRFLOW_TRAINING_HOME`` / ``~/.airflow-training``),
    started if it is not running (``env``: settings for a daemon it starts). The Airflow hook calls
    this when no cluster connection is given."""
    return start(home, env=env)
