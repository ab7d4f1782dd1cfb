"""The control plane's kubeconfig, so ``KUBECONFIG=<home>/kubeconfig kubectl …`` just works."""

from __future__ import annotations

import base64
import os
import secrets
from pathlib import Path

import yaml

from airflow_provider_training.embedded.paths import Home

CONTEXT = "airflow-training"


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def load_or_create_token(home: Home) -> str:
    """The bearer token, made once per data directory so existing kubeconfigs keep working."""
    if home.token.exists():
        return home.token.read_text().strip()
    token = secrets.token_urlsafe(32)
    _write_private(home.token, token + "\n")
    return token


def render(server: str, token: str, ca_pem: bytes, namespace: str = "default") -> str:
    cluster = {"server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": {"token": token}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace}}],
        "current-context": CONTEXT,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def server_url(home: Home) -> str | None:
    """The API server's URL the kubeconfig names (``https://127.0.0.1:PORT``), None without one."""
    try:
        config = yaml.safe_load(home.kubeconfig.read_text())
        url = config["clusters"][0]["cluster"]["server"]
    except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError):
        return None
    return url if isinstance(url, str) else None


def write(home: Home, server: str, token: str, ca_pem: bytes) -> Path:
    _write_private(home.kubeconfig, render(server, token, ca_pem))
    return home.kubeconfig
