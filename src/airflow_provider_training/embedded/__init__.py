"""The embedded control plane: a Kubernetes-compatible API server over a SQLite store, run as a
daemon per data directory. ``ensure_running()`` gives a client what it needs to reach it."""

from airflow_provider_training.embedded.daemon import (
    ControlPlane,
    DaemonError,
    ensure_running,
    start,
    status,
    stop,
)
from airflow_provider_training.embedded.paths import Home, resolve_home

__all__ = ["ControlPlane", "DaemonError", "Home", "ensure_running", "resolve_home", "start", "status", "stop"]
