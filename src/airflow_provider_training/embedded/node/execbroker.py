"""The node's side of an MPI launcher's exec into its workers (``execclient``): the launcher's view
hides the node's files and its processes may not enter another pod's view, so it asks the node
agent, over one Unix socket, ``<home>/node/bin/exec.sock``, which every view shows (read-only, as
the rest of ``node/bin``). The agent runs ``entry.py exec`` for it with the launcher's stdin,
stdout and stderr (received over the socket) and returns the exit code.

Who asks is known from the kernel, not from the request: the peer's process (``SO_PEERCRED``) and
its mount namespace, which is its pod's view. Only an MPI launcher (a pod the node marked
``execBroker``: the MPIJob's ``kubectl-delivery``, a TrainJob's rsh agent) is served, only into
pods of its own namespace and job (upstream grants the launcher ``pods/exec`` on its job's pods), a
refusal in kube-apiserver's words on the command's stderr. When the connection closes before the
command ends (the launcher's exec was killed, its pod went) the command's process tree is killed.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
import sys
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded.node import lifecycle, orted, podexec, proctree
from airflow_provider_training.specs.unstructured import Unstructured

log = logging.getLogger(__name__)
MAX_REQUEST = 1 << 20
REQUEST_TIMEOUT = 10.0
SOCKET = podexec.BROKER_SOCKET


class ExecBroker:
    def __init__(self, node_dir: Path) -> None:
        self.node_dir = node_dir
        self.sock: socket.socket | None = None
        self.accepting: asyncio.Task[None] | None = None
        self.sessions: set[asyncio.Task[None]] = set()

    @property
    def path(self) -> Path:
        return self.node_dir / "bin" / SOCKET

    def serve(self) -> None:
        """Listen on ``<node_dir>/bin/exec.sock``."""
        self.close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # through a descriptor of its directory: the path may be longer than a socket address takes
        directory = os.open(self.path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            sock.bind(f"/proc/self/fd/{directory}/{SOCKET}")
        finally:
            os.close(directory)
        os.chmod(self.path, 0o666)  # whichever user the launcher runs as; who it is, is checked
        sock.listen(64)
        sock.setblocking(False)
        self.sock = sock
        self.accepting = asyncio.create_task(self._accept(sock))

    def close(self) -> None:
        """Stop serving; commands still running are killed (their sessions are cancelled)."""
        if self.accepting is not None:
            self.accepting.cancel()
        for session in list(self.sessions):
            session.cancel()
        if self.sock is not None:
            self.sock.close()
            self.sock = None
            self.path.unlink(missing_ok=True)

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError as exc:
                log.warning("the node's exec socket %s: %s", self.path, exc)
                return
            session = asyncio.create_task(self._session(conn))
            self.sessions.add(session)
            session.add_done_callback(self.sessions.discard)

    async def _session(self, conn: socket.socket) -> None:
        fds: list[int] = []
        process: asyncio.subprocess.Process | None = None
        registered: Path | None = None
        try:
            pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
            request, fds = await asyncio.to_thread(_read_request, conn)
            argv = [str(a) for a in request.get("argv") or []]
            refusal, namespace, pod_dir = await asyncio.to_thread(self._check, pid, argv)
            if refusal:
                with contextlib.suppress(OSError):
                    os.write(fds[2], (refusal + "\n").encode())
                await _reply(conn, 1)
                return
            env = {"PATH": os.environ.get("PATH", "")}
            timeout = (request.get("env") or {}).get(orted.TIMEOUT_ENV) or os.environ.get(orted.TIMEOUT_ENV)
            if timeout:
                env[orted.TIMEOUT_ENV] = str(timeout)
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
            else:  # the launcher's exec went away: so does the command
                waiting.cancel()
                await asyncio.to_thread(proctree.kill_tree, process.pid)
                await process.wait()
        except (OSError, ValueError, struct.error) as exc:
            log.info("a request on the node's exec socket failed: %s", exc)
        finally:
            if process is not None and process.returncode is None:
                await asyncio.to_thread(proctree.kill_tree, process.pid)  # cancelled: the node stops
            podexec.unregister(registered)
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            conn.close()

    def _check(self, pid: int, argv: list[str]) -> tuple[str, str, Path | None]:
        """(a refusal in kube-apiserver's words or "", the caller's namespace, the target's directory)."""
        caller = self._pod_of(pid)
        if caller is None:
            return "error: the node's exec serves the MPI launchers of this node only", "", None
        namespace = str(caller.get("namespace") or "")
        if len(argv) < 2 or argv[0] != "exec":
            return "error: only `kubectl exec POD [-c CONTAINER] -- COMMAND` is served here", namespace, None
        found = podexec.find_pod(self.node_dir, namespace, argv[1])
        if found is None:
            return "", namespace, None  # entry.py exec answers NotFound itself
        pod_dir, spec = found
        if not caller.get("job") or spec.get("job") != caller.get("job"):
            refusal = (
                f'Error from server (Forbidden): pods "{argv[1]}" is forbidden: the launcher may exec only into '
                "the pods of its own job"
            )
            return refusal, namespace, None
        return "", namespace, pod_dir

    def _pod_of(self, pid: int) -> Unstructured | None:
        """The spec of the MPI launcher pod whose view process ``pid`` is in, or None."""
        try:
            view = os.readlink(f"/proc/{pid}/ns/mnt")
        except OSError:
            return None
        if view == os.readlink("/proc/self/ns/mnt"):
            return None  # the host's: not a pod
        for spec_path in (self.node_dir / "pods").glob(f"*/{podexec.SPEC}"):
            try:
                spec = json.loads(spec_path.read_text())
            except (OSError, ValueError):
                continue
            if spec.get("execBroker") and view in _views(spec_path.parent):
                return spec if isinstance(spec, dict) else None
        return None


def _views(pod_dir: Path) -> set[str]:
    """The mount namespaces of a pod: its supervisor's (the pod's view) and its containers'."""
    pids: list[int] = []
    with contextlib.suppress(OSError, ValueError):
        pids.append(int((pod_dir / "supervisor.pid").read_text()))
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        state = json.loads((pod_dir / "state.json").read_text())
        for status in (state.get("containerStatuses") or []) + (state.get("initContainerStatuses") or []):
            container_id = str(status.get("containerID") or "")
            if container_id.startswith("process://"):
                pids.append(int(container_id.removeprefix("process://")))
    out = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            out.add(os.readlink(f"/proc/{pid}/ns/mnt"))
    return out


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
        if not chunk or len(data) + len(chunk) > MAX_REQUEST:
            break
        data += chunk
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
