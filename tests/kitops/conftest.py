from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_provider_training.kitops.credentials import Credential
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.registry import RegistryClient, RegistryOptions


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "kithome")


def make_tree(root: Path, files: dict[str, bytes | str]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return root


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return make_tree(
        tmp_path / "ctx",
        {
            "Kitfile": "manifestVersion: 1.0.0\npackage:\n  name: mnist\n"
            "model:\n  name: mnist\n  path: model\n"
            "code:\n  - path: src\ndatasets:\n  - name: train\n    path: data/train.csv\n",
            "model/weights.bin": bytes(range(256)) * 4000,
            "model/config.json": '{"layers": 3}',
            "src/train.py": "print('hi')\n",
            "data/train.csv": "a,b\n1,2\n",
        },
    )


@pytest.fixture
def client_for() -> Callable[..., RegistryClient]:
    clients: list[RegistryClient] = []

    def make(reg: object, password: str | None = None, **opts: object) -> RegistryClient:
        cred = None
        if getattr(reg, "username", None):
            cred = Credential(reg.username, password if password is not None else reg.password)  # type: ignore[attr-defined]
        options = RegistryOptions(
            plain_http=reg.plain_http,
            ca_cert=str(reg.ca_cert) if reg.ca_cert else None,  # type: ignore[attr-defined]
            backoff=0.05,
            backoff_max=0.5,
            **opts,
        )  # type: ignore[arg-type]
        c = RegistryClient(reg.host, cred, options)  # type: ignore[attr-defined]
        clients.append(c)
        return c

    yield make  # type: ignore[misc]
    for c in clients:
        c.close()
