"""What every request handler shares: the store, the data directory, the token, tunables, and who
decides who a request is (``authenticator``) and what it may do (``authorizer``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_provider_training.embedded.apiserver.authn import Authenticator
from airflow_provider_training.embedded.apiserver.metrics import ApiMetrics
from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.rbac.index import RBAC, Authorizer, PermissiveAuthorizer, RBACAuthorizer
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
    # "rbac" (as a cluster: a pod may do what its service account is bound to) or "permissive"
    # (any valid token may do anything, the control plane's behaviour before RBAC).
    authorization: str = RBAC


@dataclass
class ServerContext:
    store: Store
    home: Home
    token: str
    settings: Settings = field(default_factory=Settings)
    metrics: ApiMetrics = field(default_factory=ApiMetrics)
    authenticator: Authenticator = field(init=False)
    authorizer: Authorizer = field(init=False)

    def __post_init__(self) -> None:
        self.authenticator = Authenticator(self.store, self.home, self.token)
        self.authorizer = RBACAuthorizer(self.store) if self.settings.authorization == RBAC else PermissiveAuthorizer()
