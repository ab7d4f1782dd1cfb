"""What every request handler shares: the store, the data directory, the token and tunables."""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_provider_training.embedded.apiserver.metrics import ApiMetrics
from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.store import Store

# Kubernetes' limit on a request body.
MAX_BODY_BYTES = 3 * 1024 * 1024


@dataclass(frozen=True)
class Settings:
    # How often a watch that asked for bookmarks gets one (kube-apiserver: about a minute).
    bookmark_interval: float = 60.0
    # How often ``logs -f`` looks for new output and for the container's end.
    log_poll_interval: float = 0.1
    max_body_bytes: int = MAX_BODY_BYTES
    # How often an exec whose command takes no more input checks that its client is still there.
    exec_probe_interval: float = 1.0
    # How long an exec's output is still sent after its command exited (and its tree was killed).
    exec_drain_seconds: float = 1.0


@dataclass
class ServerContext:
    store: Store
    home: Home
    token: str
    settings: Settings = field(default_factory=Settings)
    metrics: ApiMetrics = field(default_factory=ApiMetrics)
