"""The node's side of an MPI launcher's ``kubectl exec`` (``execclient``): one Unix socket per
launcher pod, in the volume the launcher sees at ``/opt/kube``, on which the node agent runs
``entry.py exec`` for it, with the launcher's stdin, stdout and stderr (received over the socket).

The socket's place is the launcher's credential: only that pod sees it, and the agent lets it exec
only into pods of its own namespace controlled by the same job (as upstream's launcher Role, which
grants ``pods/exec`` on its job's workers), a refusal in kube-apiserver's words on the command's
stderr. When the connection closes before the command ends (the launcher's ``kubectl`` was killed,
the launcher pod went) the command's process tree is killed, as when an exec stream ends.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import json
import logging
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded.node import lifecycle, orted, podexec, proctree

log = logging.getLogger(__name__)
MAX_REQUEST = 1 << 20
REQUEST_TIMEOUT = 10.0


@dataclass
class _Listener:
    sock: socket.socket
    path: Path
    accepting: asyncio.Task[None] | None = None
    sessions: set[asyncio.Task[None]] = field(default_factory=set)


class ExecBroker:
    def __init__(self, node_dir: Path) -> None:
        self.node_dir = node_dir
        self.listeners: dict[str, _Listener] = {}

    def serve(self, uid: str, path: Path, namespace: str, owner: str) -> None:
        """Listen on ``path`` for pod ``uid`` (a launcher in ``namespace`` controlled by ``owner``)."""
        self.close(uid)
        path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # through a descriptor of its directory: the path may be longer than a socket address takes
        directory = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            sock.bind(f"/proc/self/fd/{directory}/{path.name}")
        finally:
            os.close(directory)
        os.chmod(path, 0o666)  # whichever user the launcher runs as
        sock.listen(64)
        sock.setblocking(False)
        listener = _Listener(sock, path)
        listener.accepting = asyncio.create_task(self._accept(listener, namespace, owner))
        self.listeners[uid] = listener

    def close(self, uid: str) -> None:
        """Stop serving pod ``uid``; commands still running are killed (their sessions are cancelled)."""
        listener = self.listeners.pop(uid, None)
        if listener is None:
            return
        if listener.accepting is not None:
            listener.accepting.cancel()
        for session in list(listener.sessions):
            session.cancel()
        listener.sock.close()
        listener.path.unlink(missing_ok=True)

    def close_all(self) -> None:
        for uid in list(self.listeners):
            self.close(uid)

    async def _accept(self, listener: _Listener, namespace: str, owner: str) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(listener.sock)
            except OSError as exc:
                log.warning("exec socket %s: %s", listener.path, exc)
                return
            session = asyncio.create_task(self._session(conn, namespace, owner))
            listener.sessions.add(session)
            session.add_done_callback(listener.sessions.discard)

    async def _session(self, conn: socket.socket, namespace: str, owner: str) -> None:
        fds: list[int] = []
        process: asyncio.subprocess.Process | None = None
        registered: Path | None = None
        try:
            request, fds = await asyncio.to_thread(_read_request, conn)
            argv = [str(a) for a in request.get("argv") or []]
            env = {"PATH": os.environ.get("PATH", "")}
            timeout = (request.get("env") or {}).get(orted.TIMEOUT_ENV) or os.environ.get(orted.TIMEOUT_ENV)
            if timeout:
                env[orted.TIMEOUT_ENV] = str(timeout)
            refusal, pod_dir = await asyncio.to_thread(self._check, argv, namespace, owner)
            if refusal:
                with contextlib.suppress(OSError):
                    os.write(fds[2], (refusal + "\n").encode())
                await _reply(conn, 1)
                return
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-S",
                str(lifecycle.ENTRY),
                "exec",
                str(self.node_dir),
                namespace,
                *argv,
                stdin=fds[0],
                stdout=fds[1],
                stderr=fds[2],
                start_new_session=True,  # its tree is one session: what is killed if the client goes
                env=env,
            )
            for fd in fds:
                os.close(fd)
            fds = []
            if pod_dir is not None:
                registered = podexec.register(pod_dir, process.pid)
            waiting = asyncio.create_task(process.wait())
            gone = asyncio.create_task(asyncio.get_running_loop().sock_recv(conn, 1))
            done, _ = await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
            if waiting in done:
                gone.cancel()
                code = process.returncode or 0
                await _reply(conn, 128 - code if code < 0 else code)
            else:  # the launcher's kubectl went away: so does the command
                waiting.cancel()
                await asyncio.to_thread(proctree.kill_tree, process.pid)
                await process.wait()
        except (OSError, ValueError, asyncio.TimeoutError) as exc:
            log.info("an exec request on the node's exec socket failed: %s", exc)
        finally:
            if process is not None and process.returncode is None:
                await asyncio.to_thread(proctree.kill_tree, process.pid)  # cancelled: the launcher pod went
            podexec.unregister(registered)
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            conn.close()

    def _check(self, argv: list[str], namespace: str, owner: str) -> tuple[str, Path | None]:
        """A refusal in kube-apiserver's words (or ""), and the target pod's directory."""
        if len(argv) < 2 or argv[0] != "exec":
            return "error: only `kubectl exec POD [-c CONTAINER] -- COMMAND` is served here", None
        found = podexec.find_pod(self.node_dir, namespace, argv[1])
        if found is None:
            return "", None  # entry.py exec answers NotFound itself
        pod_dir, spec = found
        if not owner or spec.get("owner") != owner:
            return (
                f'Error from server (Forbidden): pods "{argv[1]}" is forbidden: the launcher may exec only into '
                "the pods of its own job",
                None,
            )
        return "", pod_dir


def _read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One JSON line and the three descriptors sent with it (blocking, with a timeout: in a thread)."""
    conn.settimeout(REQUEST_TIMEOUT)
    data, fds = b"", []
    while not data.endswith(b"\n"):
        chunk, ancillary, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(3 * 4))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                received = array.array("i")
                received.frombytes(payload[: len(payload) - len(payload) % 4])
                fds += list(received)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST:
            break
    conn.setblocking(False)
    try:
        request = json.loads(data) if len(fds) == 3 and data.endswith(b"\n") else None
    except ValueError:
        request = None
    if not isinstance(request, dict):
        for fd in fds:
            os.close(fd)
        raise ValueError("an exec request needs one line of JSON and the client's stdin, stdout and stderr")
    return request, fds


async def _reply(conn: socket.socket, code: int) -> None:
    with contextlib.suppress(OSError):
        await asyncio.get_running_loop().sock_sendall(conn, json.dumps({"exitCode": code}).encode() + b"\n")
