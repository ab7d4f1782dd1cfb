"""``kubectl exec`` (``/api/v1/namespaces/NS/pods/NAME/exec``) over WebSocket, the protocol kubectl
1.37 speaks (``v5.channel.k8s.io``, also ``v4``).

Each binary message starts with its stream: 0 stdin, 1 stdout, 2 stderr, 3 the final Status, 4 a
terminal resize (``{"Width": w, "Height": h}``), 255 a close (v5: ``[255, 0]`` = stdin closed). The
command runs through the node's ``entry.py exec`` (``node/podexec.py``): with the container's
environment, working directory and mount view, as a process of the pod would (a pod's loopback
address is reachable from it as from the pod). ``tty=true`` gives it a pseudo-terminal; stdout and
stderr are then one stream. The end is a Status on stream 3: ``Success``, or ``NonZeroExitCode``
with the exit code as kubelet reports it (127: no such command), which kubectl prints as
``command terminated with exit code N`` and exits with.

Refusals come before the upgrade, as kube-apiserver's Status (404 for a missing pod, 400 for a
missing container, a finished pod or no command). Nothing is written to the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib.util
import json
import logging
import os
import shutil
import struct
import sys
import termios
from pathlib import Path
from typing import Any

from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from airflow_provider_training.embedded.apiserver import errors, operatorpod
from airflow_provider_training.embedded.apiserver.context import ServerContext, Settings
from airflow_provider_training.embedded.apiserver.http import error_response
from airflow_provider_training.embedded.node import podexec, proctree  # stdlib-only: where a pod's container runs
from airflow_provider_training.embedded.resources import PODS
from airflow_provider_training.specs.unstructured import Unstructured

log = logging.getLogger(__name__)
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
CHUNK = 64 * 1024
# Linux's MAX_ARG_STRLEN (32 pages, with the terminating NUL): execve refuses a longer argument.
MAX_ARGUMENT_BYTES = 32 * 4096 - 1


def _entry() -> str:
    # The node's entry script, by location: the API server does not import the node agent's modules.
    spec = importlib.util.find_spec("airflow_provider_training.embedded.node.entry")
    assert spec is not None and spec.origin is not None
    return spec.origin


def _flag(query: Any, name: str) -> bool:
    return str(query.get(name, "")).lower() in ("true", "1")


def check(ctx: ServerContext, namespace: str, name: str, query: Any) -> tuple[Unstructured, str, list[str]]:
    """The pod, the container and the command of an exec request, or the ApiError kube-apiserver gives."""
    pod = ctx.store.get(PODS.key, namespace, name)
    if pod is None:
        raise errors.not_found(PODS, name)
    command = list(query.getlist("command"))
    if not command:
        raise errors.bad_request("you must specify at least one command for the container")
    for i, argument in enumerate(command):
        size = len(argument.encode("utf-8", "surrogateescape"))
        if size > MAX_ARGUMENT_BYTES:
            raise errors.bad_request(
                f"command[{i}] is {size} bytes: the node starts a command with execve, which takes at most "
                f"{MAX_ARGUMENT_BYTES} bytes per argument; pass long input on stdin instead "
                "(kubectl exec -i POD -- sh -c 'cat > /tmp/script; sh /tmp/script' < script)"
            )
    spec = pod.get("spec") or {}
    containers = [c.get("name") for c in spec.get("containers") or []]
    init = [c.get("name") for c in spec.get("initContainers") or []]
    container = query.get("container") or (containers[0] if containers else "")
    if container not in containers + init:
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    if (pod.get("spec") or {}).get("nodeName") == operatorpod.NODE:
        raise errors.bad_request(f"pod {name} stands for the embedded control plane's controllers: it has no processes")
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise errors.bad_request(f"cannot exec into a container in a completed pod; current phase is {phase}")
    running = any(
        s.get("name") == container and "running" in (s.get("state") or {})
        for s in ((pod.get("status") or {}).get("containerStatuses") or [])
        + ((pod.get("status") or {}).get("initContainerStatuses") or [])
    )
    if not running:
        raise errors.bad_request(f'unable to upgrade connection: container not found ("{container}")')
    return pod, container, command


def plain_http(ctx: ServerContext, path: str, query: Any) -> errors.ApiError | None:
    """A request to ``…/pods/NAME/exec`` that is not a WebSocket upgrade (kubectl's SPDY fallback
    after a refused upgrade): the same refusal, or that only WebSocket is served. None: not exec."""
    parts = [p for p in path.split("/") if p]
    if len(parts) != 7 or parts[:3] != ["api", "v1", "namespaces"] or parts[4] != "pods" or parts[6] != "exec":
        return None
    try:
        check(ctx, parts[3], parts[5], query)
    except errors.ApiError as exc:
        return exc
    return errors.bad_request(
        "Upgrade request required: the embedded control plane serves exec over WebSocket "
        f"({', '.join(PROTOCOLS)}), not SPDY; kubectl 1.30 and later use it by default"
    )


def _status(code: int, command: list[str]) -> dict[str, Any]:
    code = 128 - code if code < 0 else code  # killed by signal N: 128+N, as kubelet reports it
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: error executing command {command}, exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def _with_terminal(argv: list[str]) -> list[str]:
    setsid = shutil.which("setsid")
    if setsid:
        return [setsid, "--ctty", *argv]
    code = "import fcntl, os, sys, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execv(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-I", "-S", "-c", code, *argv]


async def serve(websocket: WebSocket, ctx: ServerContext, namespace: str, name: str) -> None:
    query = websocket.query_params
    try:
        _, container, command = check(ctx, namespace, name, query)
    except errors.ApiError as exc:
        await deny(websocket, error_response(exc))
        return
    offered = [p.strip() for p in websocket.headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    protocol = next((p for p in PROTOCOLS if p in offered), None)
    if protocol is None:
        await deny(
            websocket,
            error_response(errors.bad_request(f"none of the offered subprotocols {offered} is served: {PROTOCOLS}")),
        )
        return
    tty, stdin = _flag(query, "tty"), _flag(query, "stdin")
    node_dir = ctx.home.root / "node"
    planned = podexec.direct(node_dir, namespace, name, container, command)
    if planned is not None:
        argv, env = planned
    else:
        argv = [sys.executable, "-I", "-S", _entry(), "exec", str(node_dir), namespace, "exec", name]
        argv, env = [*argv, "--container", container, "--", *command], None
    found = podexec.find_pod(node_dir, namespace, name)
    await websocket.accept(subprotocol=protocol)
    session = _Session(websocket, protocol, tty, stdin, command, ctx.settings)
    try:
        await session.run(argv, env, found[0] if found else None)
    except (WebSocketDisconnect, RuntimeError, OSError) as exc:  # the client went away
        log.debug("exec in %s/%s ended early: %s", namespace, name, exc)
    finally:
        session.stop()


async def deny(websocket: WebSocket, response: Response) -> None:
    try:
        await websocket.send_denial_response(response)
    except RuntimeError:  # the server cannot send a response before the handshake
        await websocket.close(code=1008)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _start_failure(exc: OSError, command: list[str]) -> dict[str, Any]:
    """What kubelet reports when the runtime cannot start the command (``E2BIG``, say)."""
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"error executing command in container: failed to start {command[0]!r}: {exc.strerror}",
        "reason": "InternalError",
        "code": 500,
    }


class _Session:
    def __init__(
        self, websocket: WebSocket, protocol: str, tty: bool, stdin: bool, command: list[str], settings: Settings
    ) -> None:
        self.ws, self.v5, self.tty, self.stdin, self.command = websocket, protocol.startswith("v5"), tty, stdin, command
        self.settings = settings
        self.process: asyncio.subprocess.Process | None = None
        self.starttime: int | None = None  # the command's, for kill_tree once it is reaped
        self.master: int | None = None
        self.registered: Path | None = None
        self.killed = False
        self.send_lock = asyncio.Lock()

    async def send(self, stream: int, data: bytes) -> None:
        async with self.send_lock:
            await self.ws.send_bytes(bytes([stream]) + data)

    async def _spawn(self, argv: list[str], env: dict[str, str] | None) -> list[asyncio.Task[None]]:
        if self.tty:
            self.master, slave = os.openpty()
            os.set_blocking(self.master, False)  # a full terminal must not stall the event loop
            try:
                # a session of its own whose controlling terminal is the pty (util-linux's setsid;
                # uvloop does not run preexec_fn hooks reliably)
                self.process = await asyncio.create_subprocess_exec(
                    *_with_terminal(argv), stdin=slave, stdout=slave, stderr=slave, env=env
                )
            finally:
                os.close(slave)
            return [asyncio.create_task(self._pump_pty())]
        self.process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if self.stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its tree is one session: what `stop` kills
            env=env,
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        return [
            asyncio.create_task(self._pump(self.process.stdout, STDOUT)),
            asyncio.create_task(self._pump(self.process.stderr, STDERR)),
        ]

    async def run(self, argv: list[str], env: dict[str, str] | None, pod_dir: Path | None) -> None:
        try:
            pumps = await self._spawn(argv, env)
        except OSError as exc:
            await self.send(ERROR, json.dumps(_start_failure(exc, self.command)).encode())
            await self.ws.close(code=1000)
            return
        assert self.process is not None
        found = proctree.stat(self.process.pid)
        self.starttime = found.starttime if found is not None else None
        if pod_dir is not None:
            self.registered = podexec.register(pod_dir, self.process.pid)
        receiver = asyncio.create_task(self._receive())
        try:
            code = await self.process.wait()
            # The stream ends with the command, as kubelet's does: children it left in the
            # background (holding its stdout and stderr) go with it, and what they wrote is sent.
            # The command is reaped: its pid may be another process's by now, hence the start time.
            await asyncio.to_thread(proctree.kill_tree, self.process.pid, self.starttime)
            self.killed = True
            await asyncio.wait(pumps, timeout=self.settings.exec_drain_seconds)
        finally:
            receiver.cancel()
            for pump in pumps:
                pump.cancel()
        await self.send(ERROR, json.dumps(_status(code, self.command)).encode())
        await self.ws.close(code=1000)

    async def _pump(self, reader: asyncio.StreamReader, stream: int) -> None:
        while chunk := await reader.read(CHUNK):
            await self.send(stream, chunk)

    async def _pump_pty(self) -> None:
        assert self.master is not None
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[bytes] = asyncio.Queue()

        def readable() -> None:
            assert self.master is not None
            try:
                data = os.read(self.master, CHUNK)
            except BlockingIOError:
                return
            except OSError:  # EIO: every holder of the terminal is gone
                data = b""
            if not data:
                loop.remove_reader(self.master)
            queue.put_nowait(data)

        loop.add_reader(self.master, readable)
        while data := await queue.get():
            await self.send(STDOUT, data)

    async def _receive(self) -> None:
        try:
            while True:
                message = await self.ws.receive_bytes()
                if message:
                    await self._handle(message[0], message[1:])
        except (WebSocketDisconnect, RuntimeError, KeyError, OSError):
            self.stop()  # the client is gone: so is its command

    async def _handle(self, stream: int, data: bytes) -> None:
        if stream == STDIN and self.stdin:
            await self._write(data)
        elif stream == CLOSE and self.v5 and data[:1] == bytes([STDIN]):
            await self._close_stdin()
        elif stream == RESIZE and self.tty and self.master is not None:
            with contextlib.suppress(ValueError, OSError, KeyError, TypeError):
                size = json.loads(data)
                winsize = struct.pack("HHHH", int(size["Height"]), int(size["Width"]), 0, 0)
                fcntl.ioctl(self.master, termios.TIOCSWINSZ, winsize)

    async def _until(self, pending: asyncio.Future[Any]) -> None:
        """Wait for ``pending`` (the command taking its input) while checking that the client is
        still there: no message is read meanwhile (that is the back-pressure), so a gone client
        would go unseen; an empty stdout frame, which kubectl writes as nothing, fails once it is."""
        while True:
            done, _ = await asyncio.wait({pending}, timeout=self.settings.exec_probe_interval)
            if done:
                return
            try:
                await self.send(STDOUT, b"")
            except BaseException:
                pending.cancel()
                raise

    async def _write(self, data: bytes) -> None:
        assert self.process is not None
        if self.tty and self.master is not None:
            await self._write_terminal(memoryview(data))
            return
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(ConnectionError):
                stdin.write(data)
                await self._until(asyncio.ensure_future(stdin.drain()))

    async def _write_terminal(self, data: memoryview) -> None:
        loop = asyncio.get_running_loop()
        while data and self.master is not None:
            try:
                data = data[os.write(self.master, data) :]
            except BlockingIOError:
                master, writable = self.master, loop.create_future()
                loop.add_writer(master, _settle, writable)
                try:
                    await self._until(writable)
                finally:
                    with contextlib.suppress(OSError, ValueError):
                        loop.remove_writer(master)
            except OSError:
                return

    async def _close_stdin(self) -> None:
        assert self.process is not None
        if self.tty and self.master is not None:
            await self._write_terminal(memoryview(b"\x04"))  # end of file, as a terminal gives it
        elif self.process.stdin is not None:
            self.process.stdin.close()

    def stop(self) -> None:
        """The stream ended: the command's tree goes too (as with kubelet), and its terminal."""
        if self.process is not None and not self.killed:
            self.killed = True
            proctree.kill_tree(self.process.pid, self.starttime)
        podexec.unregister(self.registered)
        self.registered = None
        if self.master is not None:
            with contextlib.suppress(OSError, ValueError):
                asyncio.get_running_loop().remove_reader(self.master)
            with contextlib.suppress(OSError):
                os.close(self.master)
            self.master = None
