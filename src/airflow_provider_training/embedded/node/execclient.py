"""An MPI launcher's exec into a worker, from inside its pod's view: the view hides the node's
files and the launcher's processes may not enter another pod's view, so the command is asked of
the node agent (``execbroker``) over ``<home>/node/bin/exec.sock``, which every view shows, handing
over this process's stdin, stdout and stderr; this process exits with the command's code. Closing
the connection (this process killed: ``mpirun`` ending its rsh agent) ends the command.

``podexec.main`` comes here when it finds no node directory (the delivered ``kubectl`` of an MPIJob
launcher, a TrainJob's rsh agent); ``entry.py remote-exec SOCKET exec POD -- ARGV`` asks directly.
Standard library only.
"""

from __future__ import annotations

import array
import json
import os
import socket
import sys

from airflow_provider_training.embedded.node import orted

# (what the agent reads of one request; a longer command line is refused there, not cut)
MAX_REQUEST = 1 << 20


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: kubectl exec POD [--container NAME] -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    return forward(argv[0], argv[1:])


def forward(path: str, args: list[str]) -> int:
    """Ask the node to run ``args`` (``exec POD [-c C] -- ARGV``); the command's exit code."""
    request = {"argv": args, "env": {k: v for k, v in os.environ.items() if k == orted.TIMEOUT_ENV}}
    payload = json.dumps(request).encode() + b"\n"
    if len(payload) > MAX_REQUEST:
        print(f"error: the command is {len(payload)} bytes; the node takes at most {MAX_REQUEST}", file=sys.stderr)
        return 1
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    directory = -1
    try:
        # through a descriptor of its directory: the path may be longer than a socket address takes
        directory = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        sock.connect(f"/proc/self/fd/{directory}/{os.path.basename(path)}")
        fds = array.array("i", [0, 1, 2])
        sent = sock.sendmsg([payload[:65536]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        sock.sendall(payload[sent:])
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    except OSError as exc:
        print(f"error: cannot reach the node's exec at {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        sock.close()
        if directory >= 0:
            os.close(directory)
    try:
        return int(json.loads(reply)["exitCode"])
    except (ValueError, KeyError, TypeError):
        print("error: the node ended the exec without an exit code (was the daemon stopped?)", file=sys.stderr)
        return 255
