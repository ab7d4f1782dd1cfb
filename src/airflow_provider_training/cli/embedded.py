"""``airflow-training embedded start | stop | status [--home DIR]``."""

from __future__ import annotations

import argparse
from typing import Any

from airflow_provider_training.embedded import daemon
from airflow_provider_training.embedded.paths import HOME_ENV
from airflow_provider_training.embedded.rbac.index import MODES
from airflow_provider_training.embedded.store import StoreVersionError

AUTHORIZATION_ENV = "AIRFLOW_TRAINING_AUTHORIZATION"


def _start(args: argparse.Namespace) -> int:
    env = {AUTHORIZATION_ENV: args.authorization} if args.authorization else None
    try:
        plane = daemon.start(args.home, timeout=args.timeout, env=env)
    except (daemon.DaemonError, StoreVersionError) as exc:
        print(f"error: {exc}")
        return 1
    print(f"control plane running (pid {plane.pid})")
    print(f"API:        {plane.api_url}")
    print(f"kubeconfig: {plane.kubeconfig}")
    print(f"try:        KUBECONFIG={plane.kubeconfig} kubectl get pytorchjobs -A")
    return 0


def _stop(args: argparse.Namespace) -> int:
    try:
        was_running = daemon.stop(args.home, timeout=args.timeout, replicas=args.all)
    except daemon.DaemonError as exc:
        print(f"error: {exc}")
        return 1
    print("control plane stopped" if was_running else "control plane was not running")
    return 0


def _status(args: argparse.Namespace) -> int:
    st = daemon.status(args.home)
    print(f"status:     {st.message}")
    if st.api_url:
        print(f"API:        {st.api_url}")
    print(f"kubeconfig: {st.kubeconfig}")
    return 0 if st.ready else 3


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("embedded", help="run the embedded control plane (a local Kubernetes API)")
    commands = parser.add_subparsers(dest="embedded_command", metavar="COMMAND")
    commands.required = True
    for name, func, help_text, timeout in (
        (
            "start",
            _start,
            "start the daemon (detached) unless it runs; print its API URL and kubeconfig",
            30.0,
        ),
        ("stop", _stop, "stop the daemon (SIGTERM, then SIGKILL after --timeout)", 15.0),
        ("status", _status, "say whether the daemon runs (exit code 0) and where", 0.0),
    ):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument(
            "--home", default=None, help=f"data directory (default: ${HOME_ENV}, else ~/.airflow-training)"
        )
        if timeout:
            sub.add_argument("--timeout", type=float, default=timeout, help="seconds to wait (default %(default)s)")
        if name == "start":
            sub.add_argument(
                "--authorization",
                choices=MODES,
                default=None,
                help=(
                    f"rbac: a pod may do what its service account is bound to, as on a cluster (default, or "
                    f"${AUTHORIZATION_ENV}); permissive: every valid token may do everything. Read when the "
                    "daemon starts: stop it first to change"
                ),
            )
        if name == "stop":
            sub.add_argument(
                "--all",
                action="store_true",
                help="also stop every running replica (by default they keep running and a restarted daemon adopts them)",
            )
        sub.set_defaults(func=func)
