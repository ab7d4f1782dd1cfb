"""The daemon process: ``python -m airflow_provider_training.embedded.server --home DIR``.

It holds ``daemon.lock`` (flock) for its whole life, so the lock, not the pid file, says whether a
daemon runs; binds 127.0.0.1 on the port it had last time when that is free (kubeconfigs stay valid);
writes the kubeconfig and ``endpoint.json``; serves the API and runs the controllers on one event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import fcntl
import gc
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from typing import IO
from urllib.parse import urlsplit

import uvicorn
import websockets.http11
import yaml
from fastapi import FastAPI

from airflow_provider_training.embedded import kubeconfig, lagprobe
from airflow_provider_training.embedded.apiserver import create_app, operatorpod
from airflow_provider_training.embedded.apiserver.context import ServerContext, Settings
from airflow_provider_training.embedded.apiserver.crud import ensure_initial_namespaces
from airflow_provider_training.embedded.apiserver.limits import MAX_REQUEST_LINE_BYTES
from airflow_provider_training.embedded.apiserver.trainer import install_default_runtimes
from airflow_provider_training.embedded.controllers import CONTROLLERS
from airflow_provider_training.embedded.httpprotocol import HttpProtocol
from airflow_provider_training.embedded.node.agent import NodeAgent
from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.rbac import bootstrap
from airflow_provider_training.embedded.rbac.index import MODES, PERMISSIVE, RBAC
from airflow_provider_training.embedded.resources import INITIAL_NAMESPACES
from airflow_provider_training.embedded.runtime import ControllerContext, run_controllers
from airflow_provider_training.embedded.store import Store, StoreDamagedError, StoreFullError, StoreVersionError
from airflow_provider_training.embedded.tls import ensure_certificates

log = logging.getLogger("airflow_provider_training.embedded")
EXIT_ALREADY_RUNNING = 3
EXIT_STORE_VERSION = 4
EXIT_STORE_DAMAGED = 5
EXIT_BAD_SETTING = 6
AUTHORIZATION_ENV = "AIRFLOW_TRAINING_AUTHORIZATION"


def acquire_lock(home: Home) -> IO[str] | None:
    handle = open(home.lock, "a+")  # noqa: SIM115 - held open for the daemon's life
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _previous_port(home: Home) -> int:
    """The port the kubeconfig names, so kubeconfigs copied elsewhere keep working after a restart."""
    with contextlib.suppress(OSError, ValueError, KeyError, IndexError, TypeError, yaml.YAMLError):
        server = yaml.safe_load(home.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        return int(urlsplit(server).port or 0)
    return 0


def bind(home: Home, port: int | None) -> socket.socket:
    for candidate in [port] if port is not None else [_previous_port(home), 0]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", candidate))
        except OSError:
            sock.close()
            continue
        sock.listen(512)
        return sock
    raise OSError(f"cannot listen on 127.0.0.1:{port}")


def settings_from_env() -> Settings:
    return Settings(
        bookmark_interval=float(os.environ.get("AIRFLOW_TRAINING_BOOKMARK_INTERVAL", "60")),
        log_poll_interval=float(os.environ.get("AIRFLOW_TRAINING_LOG_POLL_INTERVAL", "0.1")),
        exec_probe_interval=float(os.environ.get("AIRFLOW_TRAINING_EXEC_PROBE_INTERVAL", "1")),
        authorization=authorization_mode(),
    )


def authorization_mode() -> str:
    """``AIRFLOW_TRAINING_AUTHORIZATION``: ``rbac`` (default) or ``permissive``; anything else stops
    the daemon rather than guess which of the two was meant."""
    mode = os.environ.get(AUTHORIZATION_ENV, RBAC).strip().lower() or RBAC
    if mode not in MODES:
        raise ValueError(
            f"{AUTHORIZATION_ENV}={mode!r} is not an authorization mode: use {RBAC} (pods may do what their service "
            f"account is bound to, as on a cluster) or {PERMISSIVE} (every valid token may do everything)"
        )
    return mode


def serve(home: Home, port: int | None = None) -> int:
    home.ensure()
    lock = acquire_lock(home)
    if lock is None:
        log.error("a daemon already runs for %s (%s is locked)", home.root, home.lock)
        return EXIT_ALREADY_RUNNING
    home.pid.write_text(f"{os.getpid()}\n")
    try:
        store = Store(home.store, event_retention=int(os.environ.get("AIRFLOW_TRAINING_EVENT_RETENTION", "50000")))
    except StoreVersionError as exc:
        log.error("%s", exc)
        home.pid.unlink(missing_ok=True)
        return EXIT_STORE_VERSION
    except (StoreDamagedError, StoreFullError) as exc:
        log.error("%s", exc)
        home.pid.unlink(missing_ok=True)
        return EXIT_STORE_DAMAGED
    try:
        settings = settings_from_env()
    except ValueError as exc:
        log.error("%s", exc)
        store.close()
        home.pid.unlink(missing_ok=True)
        return EXIT_BAD_SETTING
    token = kubeconfig.load_or_create_token(home)
    sock = bind(home, port)
    bound_port = sock.getsockname()[1]
    url = f"https://127.0.0.1:{bound_port}"
    certificates = ensure_certificates(home)
    kubeconfig.write(home, url, token, certificates.ca.read_bytes())
    ctx = ServerContext(store=store, home=home, token=token, settings=settings)
    app = create_app(ctx)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await ensure_initial_namespaces(ctx, INITIAL_NAMESPACES)  # (and their default service accounts)
        bootstrap.install(store)  # the default RBAC policy: cluster-admin, admin/edit/view, Kubeflow's roles
        install_default_runtimes(store)  # Trainer v2's ClusterTrainingRuntimes, as a default install has
        operatorpod.ensure(store)  # what `kubectl get pods -n kubeflow` shows for the controllers
        controllers = ControllerContext(store=store, home=home)
        tasks = run_controllers(controllers, [*CONTROLLERS, NodeAgent])
        probe = lagprobe.start()
        if probe is not None:
            tasks.append(probe)
        # What the daemon loaded to start (modules, models, tables) lives as long as it does: out of
        # the collector's way, a full collection set off by a large request walks only what came
        # after, not the whole heap again (each took tens of milliseconds, holding every thread).
        gc.freeze()
        # Requests run on worker threads (apiserver/offload.py): hand the interpreter to the event
        # loop every 2 ms rather than 5 when it waits for it (a request needs it a few times).
        sys.setswitchinterval(0.002)
        endpoint = {
            "pid": os.getpid(),
            "url": url,
            "port": bound_port,
            "started": time.time(),
            # the default working directory for jobs from kubectl (issue 4's node agent)
            "workdir": os.getcwd(),
        }
        tmp = home.endpoint.with_suffix(".tmp")
        tmp.write_text(json.dumps(endpoint))
        os.replace(tmp, home.endpoint)
        log.info("serving the Kubernetes API for %s on %s (authorization: %s)", home.root, url, settings.authorization)
        yield
        controllers.stopping.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    app.router.lifespan_context = lifespan
    # What WEBSOCKETS_MAX_LINE_LENGTH sets, read at each parse: the upgrade request of a long
    # `kubectl exec` command is one long line (its default 8 KiB gave a 414, then kubectl's SPDY retry)
    websockets.http11.MAX_LINE_LENGTH = MAX_REQUEST_LINE_BYTES
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=1,
        loop="uvloop",
        http=HttpProtocol,  # httptools, with a Status for a URL it cannot parse
        ssl_certfile=str(certificates.cert),
        ssl_keyfile=str(certificates.key),
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        store.close()
        home.endpoint.unlink(missing_ok=True)
        home.pid.unlink(missing_ok=True)
        lock.close()
    log.info("stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="airflow-training-embedded-daemon")
    parser.add_argument("--home", required=True)
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` writes every thread's stack to the log
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return serve(Home.at(args.home), args.port)


if __name__ == "__main__":
    sys.exit(main())
