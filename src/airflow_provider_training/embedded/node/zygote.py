"""A fork server for pod supervisors: one process that has imported the supervisor once and forks a
supervisor per pod, so a pod start costs a fork (about 1 ms) instead of a Python start-up and the
supervisor's imports (about 45 ms of CPU each, which on a 2-core machine was the largest part of a
job's start).

    python -I -S entry.py zygote      # reads pod directories, one per line, on stdin

Each child starts a session of its own, points stdin at /dev/null and stdout / stderr at
``<pod-dir>/supervisor.log``, and becomes that pod's supervisor, exactly as a freshly started one:
it outlives the zygote and the daemon. The zygote ends when its stdin closes (the daemon stopped or
died); it ignores SIGCHLD so the kernel reaps the supervisors it forked. Standard library only.
"""

from __future__ import annotations

import os
import signal
import sys

from airflow_provider_training.embedded.node import supervisor


def _child(pod_dir: str) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(os.path.join(pod_dir, "supervisor.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    _close_inherited()
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own descriptors
    sys.stdout = open(1, "w", closefd=False, buffering=1)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, buffering=1)  # noqa: SIM115
    code = 1
    try:
        code = supervisor.main(pod_dir)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _close_inherited() -> None:
    """Close the zygote's descriptors (its stdin pipe above all) in a child, so it holds none of them."""
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc (macOS): the usual low range
        fds = list(range(3, 256))
    for fd in fds:
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                continue


def main() -> int:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    for line in sys.stdin:
        pod_dir = line.strip()
        if not pod_dir:
            continue
        try:
            pid = os.fork()
        except OSError as exc:
            print(f"cannot fork a supervisor for {pod_dir}: {exc}", file=sys.stderr, flush=True)
            continue
        if pid == 0:
            _child(pod_dir)
    return 0
