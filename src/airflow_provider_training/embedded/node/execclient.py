"""The MPI launcher's ``kubectl exec`` on a node with mount views: it asks the node agent to run the
command (``execbroker``) over ``exec.sock``, the socket the agent serves in the launcher's
``/opt/kube``, handing over its own stdin, stdout and stderr, and exits with the command's code.

The launcher's view hides the node's files and its processes hold no privilege to enter another
pod's view, so the node does it, as a kubelet runs an exec for the API server. Closing the
connection (this process killed: ``mpirun`` ending its rsh agent) ends the command. Standard
library only; started as ``entry.py remote-exec SOCKET exec POD [--container C] -- ARGV``.
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
    path, args = argv[0], argv[1:]
    request = {"argv": args, "env": {k: v for k, v in os.environ.items() if k == orted.TIMEOUT_ENV}}
    payload = json.dumps(request).encode() + b"\n"
    if len(payload) > MAX_REQUEST:
        print(f"error: the command is {len(payload)} bytes; the node takes at most {MAX_REQUEST}", file=sys.stderr)
        return 1
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
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
    try:
        return int(json.loads(reply)["exitCode"])
    except (ValueError, KeyError, TypeError):
        print("error: the node ended the exec without an exit code (was the daemon stopped?)", file=sys.stderr)
        return 255
