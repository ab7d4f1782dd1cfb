"""The embedded ingress: one stable ``http://127.0.0.1:<port>`` per InferenceService, forwarding
each request to the predictor Pod that currently serves it.

The URL stays the same while the InferenceService exists (and across daemon restarts: the port is
read back from ``status.url``). The controller switches a route to a new predictor only once that
one is ready, and deletes the old Pod only once no request to it is in flight (``drained``), so a
client sending requests throughout a rollout sees none fail. A request that cannot connect to its
predictor (it just went away) is retried on the current route for up to ``retry_for`` seconds.

Written on aiohttp (server and client) because it runs several listeners inside the daemon's event
loop without owning signals or the loop, which uvicorn does not allow.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import ClientConnectorError, ClientSession, ClientTimeout, TCPConnector, web

log = logging.getLogger(__name__)
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}


@dataclass(frozen=True)
class Backend:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass
class Route:
    key: str  # namespace/name
    port: int
    runner: web.AppRunner
    backend: Backend | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)


def bind(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(512)
    sock.setblocking(False)
    return sock


class Ingress:
    def __init__(self, *, retry_for: float = 10.0, timeout: float = 300.0) -> None:
        self.routes: dict[str, Route] = {}
        self.inflight: Counter[Backend] = Counter()
        self.retry_for = retry_for
        self.timeout = timeout
        self._session: ClientSession | None = None

    @property
    def session(self) -> ClientSession:
        if self._session is None:
            self._session = ClientSession(
                connector=TCPConnector(limit=0, force_close=False),
                timeout=ClientTimeout(total=self.timeout, connect=2.0),
                auto_decompress=False,
            )
        return self._session

    async def open(self, key: str, port: int = 0) -> int:
        """Listen for ``key`` (on ``port`` when it is free, else on a new one); returns the port."""
        if key in self.routes:
            return self.routes[key].port
        try:
            sock = bind(port)
        except OSError:
            log.warning("port %d of %s is taken; its URL changes", port, key)
            sock = bind(0)
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", self._handler(key))
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        bound = int(sock.getsockname()[1])
        self.routes[key] = Route(key, bound, runner)
        return bound

    def route(self, key: str, backend: Backend | None) -> None:
        route = self.routes[key]
        if route.backend != backend:
            log.info("ingress %s -> %s", key, backend.url if backend else "(none)")
        route.backend = backend
        route.changed.set()
        route.changed = asyncio.Event()

    async def drained(self, backend: Backend, timeout: float = 60.0) -> bool:
        """Wait until no request is in flight to ``backend``; False if that took over ``timeout``."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self.inflight[backend] > 0:
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    async def close(self, key: str) -> None:
        route = self.routes.pop(key, None)
        if route is not None:
            await route.runner.cleanup()

    async def close_all(self) -> None:
        for key in list(self.routes):
            await self.close(key)
        if self._session is not None:
            await self._session.close()

    def _handler(self, key: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.retry_for
            while True:
                route = self.routes.get(key)
                if route is None:
                    return web.Response(status=404, text=f"InferenceService {key} no longer exists\n")
                backend = route.backend
                if backend is None:
                    if loop.time() >= deadline:
                        return web.Response(status=503, text=f"InferenceService {key} has no ready predictor\n")
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(route.changed.wait(), deadline - loop.time())
                    continue
                self.inflight[backend] += 1
                try:
                    async with self.session.request(
                        request.method,
                        backend.url + request.rel_url.path_qs,
                        headers=headers,
                        data=body,
                        allow_redirects=False,
                    ) as upstream:
                        payload = await upstream.read()
                        out = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP}
                        return web.Response(status=upstream.status, body=payload, headers=out)
                except ClientConnectorError:
                    # Nothing was sent: the predictor is gone or not listening. Try the current route.
                    if loop.time() >= deadline:
                        return web.Response(status=502, text=f"predictor of {key} at {backend.url} refused\n")
                    await asyncio.sleep(0.05)
                finally:
                    self.inflight[backend] -= 1

        return handle
