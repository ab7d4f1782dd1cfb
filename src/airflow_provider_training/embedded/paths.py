"""Where the embedded control plane keeps its data (one daemon per home directory)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

HOME_ENV = "AIRFLOW_TRAINING_HOME"
DEFAULT_HOME = "~/.airflow-training"


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """``--home``, else ``$AIRFLOW_TRAINING_HOME``, else ``~/.airflow-training``."""
    chosen = home if home is not None else os.environ.get(HOME_ENV) or DEFAULT_HOME
    return Path(chosen).expanduser().resolve()


@dataclass(frozen=True)
class Home:
    """The layout of a data directory; every path the daemon and its clients share is named here."""

    root: Path

    @classmethod
    def at(cls, home: str | os.PathLike[str] | None = None) -> Home:
        return cls(resolve_home(home))

    @property
    def store(self) -> Path:
        return self.root / "store.db"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def token(self) -> Path:
        return self.root / "token"

    @property
    def lock(self) -> Path:
        return self.root / "daemon.lock"

    @property
    def pid(self) -> Path:
        return self.root / "daemon.pid"

    @property
    def endpoint(self) -> Path:
        """JSON written by a daemon once it listens: pid, API URL, start time."""
        return self.root / "endpoint.json"

    @property
    def daemon_log(self) -> Path:
        return self.root / "daemon.log"

    @property
    def logs(self) -> Path:
        """Container logs: ``logs/<namespace>/<pod>/<container>/<restart>.log`` (see ``podlogs``)."""
        return self.root / "logs"

    @property
    def volumes(self) -> Path:
        return self.root / "volumes"

    def claim_dir(self, namespace: str, claim: str) -> Path:
        """The directory backing a PersistentVolumeClaim; KitOps resolves ``pvc://`` sources here."""
        return self.volumes / "pvc" / namespace / claim

    def ensure(self) -> None:
        for path in (self.root, self.logs, self.volumes):
            path.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
