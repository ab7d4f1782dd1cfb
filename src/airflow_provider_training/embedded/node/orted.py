"""An OpenMPI daemon (``orted``) that ``mpirun`` starts in a worker pod through the node's exec
(its rsh agent), watched until it has called back.

``mpirun`` waits for every daemon's call back with no time limit, and a daemon that dies first
(or hangs) leaves it waiting forever. The exec that started the daemon knows more: it sees the
daemon exit, and it sees whether the daemon holds a TCP connection to ``mpirun``'s address
(``-mca orte_hnp_uri "<job>.0;tcp://ADDR:PORT"`` on its command line). When the daemon exits
first, or has not connected within the timeout, the exec kills it and exits 1 with a line saying
so: ``mpirun`` then gives up on the job at once ("ORTE was unable to reliably start one or more
daemons") and the launcher fails. Standard library only.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from airflow_provider_training.embedded.node import proctree

TIMEOUT_ENV = "AIRFLOW_TRAINING_MPI_DAEMON_TIMEOUT"
DEFAULT_TIMEOUT = 120.0
_HNP = re.compile(r"orte_hnp_uri\W+[^;\s\"']*;tcp://([0-9.,]+):([0-9]+)")
_ESTABLISHED = "01"
_POLL = 0.05


def hnp_address(command: list[str]) -> tuple[set[str], int] | None:
    """mpirun's addresses and port, when ``command`` starts an ORTE daemon; None otherwise."""
    text = " ".join(command)
    if "orted" not in text:
        return None
    match = _HNP.search(text)
    if match is None:
        return None
    return set(match.group(1).split(",")), int(match.group(2))


def timeout() -> float:
    try:
        return max(0.1, float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT))
    except ValueError:
        return DEFAULT_TIMEOUT


def _sockets(pids: set[int]) -> set[int]:
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def connected(root: int, addresses: set[str], port: int) -> bool:
    """Whether ``root`` or a process it started holds an established connection to ADDR:PORT."""
    try:
        lines = Path(f"/proc/{root}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    wanted = set()
    for line in lines:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _ESTABLISHED:
            continue
        remote, _, remote_port = fields[2].partition(":")
        address = socket.inet_ntoa(struct.pack("<I", int(remote, 16)))
        if int(remote_port, 16) == port and address in addresses:
            wanted.add(int(fields[9]))
    return bool(wanted) and bool(wanted & _sockets(proctree.members(root) | {root}))


def run(
    command: list[str],
    env: dict[str, str],
    pod: str,
    register: Callable[[int], object] | None = None,
    in_child: Callable[[], None] | None = None,
) -> int:
    """Run the daemon as a child (``in_child`` run in it before it executes: the container's user),
    watched as the module says; its exit code (128+N for signal N)."""
    addresses, port = hnp_address(command) or (set(), 0)
    limit = timeout()
    try:
        child = subprocess.Popen(command, env=env, preexec_fn=in_child)
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"exec {command[0]}: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        return 127
    if register is not None:
        register(child.pid)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _: child.send_signal(number))
    deadline = time.monotonic() + limit
    while not connected(child.pid, addresses, port):
        code = child.poll()
        if code is not None:
            print(
                f"error: orted in pod {pod} exited with code {_exit_code(code)} before it connected back to "
                "mpirun; see the lines above",
                file=sys.stderr,
            )
            return 1
        if time.monotonic() >= deadline:
            proctree.kill_tree(child.pid)
            child.wait()
            print(
                f"error: orted in pod {pod} did not connect back to mpirun within {limit:g} s ({TIMEOUT_ENV}); "
                "it was stopped. A busy node may need more time: set a larger value in the launcher's env",
                file=sys.stderr,
            )
            return 1
        time.sleep(_POLL)
    return _exit_code(child.wait())


def _exit_code(code: int) -> int:
    return 128 - code if code < 0 else code
