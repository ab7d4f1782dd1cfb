"""A fork server for pod supervisors: one process that has imported the supervisor once and forks a
supervisor per pod, so a pod start costs a fork (about 1 ms) instead of a Python start-up and the
supervisor's imports (about 45 ms of CPU each, which on a 2-core machine was the largest part of a
job's start).

    python -I -S entry.py zygote [--spares N] [--view-root DIR] [--premount PATH ...]
                                 [--hide PATH ...] [--expose PATH ...]
                                                # reads pod directories, one per line, on stdin

Each child starts a session of its own, points stdin at /dev/null and stdout / stderr at
``<pod-dir>/supervisor.log``, and becomes that pod's supervisor, exactly as a freshly started one:
it outlives the zygote and the daemon. The zygote ends when its stdin closes (the daemon stopped or
died), or, should the pipe's write end have leaked into a process that outlives the daemon, once it
finds its parent gone (checked every ``PARENT_CHECK`` seconds); it ignores SIGCHLD so the kernel
reaps the supervisors it forked. Standard library only.

Spares (``--spares N``): the zygote keeps up to N children forked ahead, each waiting on a pipe
for its pod directory. With ``--view-root`` a spare has also built the part of a pod view every
pod shares (``isolation.prepare``: its mount namespace, the bind mounts of ``/``, the
``--premount`` mount points, the service account's above all, and the sandbox's masks, ``--hide`` /
``--expose``), so a pod's start is the rest of its
view and a spawn: the fork and most of the view (about 3 ms of CPU per pod, half of a supervisor's)
are done while the node is idle, not while the job's replicas start beside them. Spares are forked
again once pod requests have stopped for ``REFILL_DELAY``, and replaced after ``MAX_AGE`` so a view
never misses a host mount made much earlier than its pod (a running pod's view does not see later
host mounts either). They end when the zygote does (their pipe closes).
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import time
from dataclasses import dataclass

from airflow_provider_training.embedded.node import isolation, supervisor

REFILL_DELAY = 0.2
MAX_AGE = 60.0
PARENT_CHECK = 1.0


def _child(pod_dir: str, view: isolation.View | None = None, note: str = "") -> None:
    _session()
    _become(pod_dir, view, note)


def _become(pod_dir: str, view: isolation.View | None, note: str) -> None:
    """Be ``pod_dir``'s supervisor (this process's session is already its own)."""
    _to_log(pod_dir)
    if note:
        print(note, flush=True)
    code = 1
    try:
        code = supervisor.main(pod_dir, view)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _session(keep: int = -1) -> None:
    """A supervisor's own session, default signal handlers, stdin on /dev/null, and none of the
    zygote's descriptors but ``keep``."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    _close_inherited(keep)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own descriptors


def _to_log(pod_dir: str) -> None:
    log = os.open(os.path.join(pod_dir, "supervisor.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115


def _close_inherited(keep: int = -1) -> None:
    """Close the zygote's descriptors (its stdin pipe above all) in a child, so it holds none of them."""
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc (macOS): the usual low range
        fds = list(range(3, 256))
    for fd in fds:
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                continue


def _spare(pipe: int, view_root: str | None, premount: tuple[str, ...], sandbox: isolation.Sandbox) -> None:
    """A child forked ahead: build the shared part of a view, then wait for a pod directory."""
    _session(keep=pipe)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    view, note = None, ""
    if view_root:
        try:
            view = isolation.prepare(view_root, premount, sandbox)
        except OSError as exc:  # the supervisor builds its view itself, as without a spare
            note = f"a spare could not prepare a view ({exc}); the pod builds its own"
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(pipe, 4096)
        if not chunk:
            os._exit(0)  # the zygote ended or retired this spare
        data += chunk
    os.close(pipe)
    _become(data.decode().strip(), view, note)


@dataclass
class Spare:
    pid: int
    pipe: int  # write end: the pod directory goes here
    born: float


class Spares:
    def __init__(
        self, count: int, view_root: str | None, premount: tuple[str, ...], sandbox: isolation.Sandbox
    ) -> None:
        self.count, self.view_root, self.premount, self.sandbox = count, view_root, premount, sandbox
        self.ready: list[Spare] = []
        self.last_request = 0.0

    def take(self, pod_dir: str) -> bool:
        """Hand ``pod_dir`` to a waiting spare; False when none took it."""
        self.last_request = time.monotonic()
        while self.ready:
            spare = self.ready.pop(0)
            try:
                os.write(spare.pipe, f"{pod_dir}\n".encode())
                return True
            except OSError:  # it died (killed from outside): the next one
                continue
            finally:
                os.close(spare.pipe)
        return False

    def due(self) -> float | None:
        """Seconds until the next refill or retirement; None when nothing is due."""
        now = time.monotonic()
        waits = [spare.born + MAX_AGE - now for spare in self.ready]
        if len(self.ready) < self.count:
            waits.append(self.last_request + REFILL_DELAY - now)
        return max(0.0, min(waits)) if waits else None

    def tend(self) -> None:
        """Retire old spares and fork one more when due (one per call: the loop comes back)."""
        now = time.monotonic()
        for spare in [s for s in self.ready if now - s.born >= MAX_AGE]:
            self.ready.remove(spare)
            os.close(spare.pipe)  # it sees the end of its pipe and exits
        if len(self.ready) >= self.count or now - self.last_request < REFILL_DELAY:
            return
        read, write = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(read)
            os.close(write)
            print(f"cannot fork a spare supervisor: {exc}", file=sys.stderr, flush=True)
            self.last_request = now  # try again after the delay
            return
        if pid == 0:
            os.close(write)
            _spare(read, self.view_root, self.premount, self.sandbox)
        os.close(read)
        self.ready.append(Spare(pid, write, now))


def _fork(pod_dir: str) -> None:
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"cannot fork a supervisor for {pod_dir}: {exc}", file=sys.stderr, flush=True)
        return
    if pid == 0:
        _child(pod_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="entry.py zygote")
    parser.add_argument("--spares", type=int, default=0)
    parser.add_argument("--view-root")
    parser.add_argument("--premount", action="append", default=[])
    parser.add_argument("--hide", action="append", default=[])
    parser.add_argument("--expose", action="append", default=[])
    options = parser.parse_args(argv or [])
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    sandbox = isolation.Sandbox(tuple(options.hide), tuple(options.expose))
    spares = Spares(options.spares, options.view_root, tuple(options.premount), sandbox)
    spares.last_request = time.monotonic() - REFILL_DELAY  # the first spares at once
    parent = os.getppid()
    pending = b""
    while True:
        due = spares.due()
        readable, _, _ = select.select([0], [], [], PARENT_CHECK if due is None else min(due, PARENT_CHECK))
        if os.getppid() != parent:
            return 0  # the daemon is gone: its spares see their pipes close and go too
        if not readable:
            spares.tend()
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            return 0
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            pod_dir = line.decode().strip()
            if pod_dir and not spares.take(pod_dir):
                _fork(pod_dir)
