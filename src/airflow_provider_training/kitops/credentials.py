"""Registry credentials in kit's ``<home>/credentials.json`` (Docker ``config.json`` format, §4.6),
with Docker's own config as a read-only fallback. Secrets are never logged or put in messages."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_training.kitops.localstore import kitops_home

DOCKER_HUB_KEY = "https://index.docker.io/v1/"


@dataclass(frozen=True)
class Credential:
    username: str = ""
    password: str = field(default="", repr=False)
    identity_token: str = field(default="", repr=False)

    @property
    def empty(self) -> bool:
        return not (self.username or self.password or self.identity_token)


def _key(registry: str) -> str:
    return DOCKER_HUB_KEY if registry in ("docker.io", "registry-1.docker.io", "index.docker.io") else registry


def credentials_file(home: Path | None = None) -> Path:
    return (home or kitops_home()) / "credentials.json"


def _from_entry(entry: dict[str, Any]) -> Credential | None:
    token = entry.get("identitytoken") or ""
    auth = entry.get("auth") or ""
    user, password = entry.get("username") or "", entry.get("password") or ""
    if auth:
        try:
            user, _, password = base64.b64decode(auth).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
    cred = Credential(user, password, token)
    return None if cred.empty else cred


def _from_helper(helper: str, registry: str) -> Credential | None:
    try:
        out = subprocess.run(
            [f"docker-credential-{helper}", "get"],
            input=_key(registry),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    data = json.loads(out.stdout or "{}")
    user, secret = data.get("Username", ""), data.get("Secret", "")
    if user == "<token>":
        return Credential(identity_token=secret)
    return Credential(user, secret)


def _lookup(config: Path, registry: str) -> Credential | None:
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    key = _key(registry)
    helper = (data.get("credHelpers") or {}).get(key)
    if helper:
        return _from_helper(helper, registry)
    for candidate in (key, f"https://{key}", f"http://{key}"):
        entry = (data.get("auths") or {}).get(candidate)
        if entry:
            cred = _from_entry(entry)
            if cred:
                return cred
    if data.get("credsStore"):
        return _from_helper(data["credsStore"], registry)
    return None


def load_credential(registry: str, home: Path | None = None) -> Credential | None:
    """kit's store first, then ``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``."""
    cred = _lookup(credentials_file(home), registry)
    if cred:
        return cred
    docker_dir = Path(os.environ["DOCKER_CONFIG"]) if os.environ.get("DOCKER_CONFIG") else Path.home() / ".docker"
    return _lookup(docker_dir / "config.json", registry)


def save_credential(registry: str, cred: Credential, home: Path | None = None) -> Path:
    """Store in kit's ``credentials.json`` (tab-indented, atomic, mode 0600). With no username the
    secret is stored as an identity (refresh) token, as ``kit login`` does."""
    path = credentials_file(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    auths = data.setdefault("auths", {})
    if cred.username:
        auths[_key(registry)] = {"auth": base64.b64encode(f"{cred.username}:{cred.password}".encode()).decode()}
    else:
        auths[_key(registry)] = {"identitytoken": cred.identity_token or cred.password}
    fd, tmp = tempfile.mkstemp(prefix=".credentials-", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent="\t")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def remove_credential(registry: str, home: Path | None = None) -> bool:
    path = credentials_file(home)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    removed = (data.get("auths") or {}).pop(_key(registry), None) is not None
    if removed:
        path.write_text(json.dumps(data, indent="\t"))
    return removed
