"""Service-account tokens of pods: what the kubelet mounts at
``/var/run/secrets/kubernetes.io/serviceaccount/token`` and what the API server accepts from a pod.

A token is a JWT (HS256) signed with a key of this data directory (``<home>/serviceaccount.key``),
naming the pod (namespace, name, uid) and its service account, like the bound tokens of a cluster.
It is accepted while that pod exists with that uid, so it stops working once the pod is deleted;
one this control plane did not sign is refused. Tokens do not expire while their pod lives (the
kubelet would rotate them hourly; nothing here needs to).

Standard library only: the JWT is three base64url parts and an HMAC.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
ISSUER = "https://kubernetes.default.svc.cluster.local"
_KEY_FILE = "serviceaccount.key"
# Keys read, by data directory: a key is made once and never changes, and a pod start (mint) and
# each request with a pod's token (verify) would otherwise read it from disk.
_keys: dict[Path, bytes] = {}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def signing_key(home_root: Path) -> bytes:
    key = _keys.get(home_root)
    if key is None:
        key = _keys[home_root] = _read_or_make_key(home_root)
    return key


def _read_or_make_key(home_root: Path) -> bytes:
    path = home_root / _KEY_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        key = secrets.token_bytes(32)
        tmp = path.with_name(f".{_KEY_FILE}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # the first writer wins; everyone uses its key
        tmp.unlink(missing_ok=True)
        return path.read_bytes()


def mint(home_root: Path, pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
    claims = {
        "iss": ISSUER,
        "sub": f"system:serviceaccount:{meta['namespace']}:{account}",
        "aud": [ISSUER],
        "iat": int(time.time()),
        "kubernetes.io": {
            "namespace": meta["namespace"],
            "pod": {"name": meta["name"], "uid": meta["uid"]},
            "serviceaccount": {"name": account},
        },
    }
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = hmac.new(signing_key(home_root), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


@dataclass(frozen=True)
class PodIdentity:
    namespace: str
    pod: str
    uid: str
    account: str


class TokenError(ValueError):
    pass


def verify(home_root: Path, token: str) -> PodIdentity:
    """The pod a token was minted for; raises TokenError if this control plane did not sign it."""
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError("the token is not one this control plane issued")
    expected = hmac.new(signing_key(home_root), f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
    try:
        signature = _unb64(parts[2])
        claims = json.loads(_unb64(parts[1]))
        info = claims["kubernetes.io"]
        identity = PodIdentity(
            str(info["namespace"]),
            str(info["pod"]["name"]),
            str(info["pod"]["uid"]),
            str(info["serviceaccount"]["name"]),
        )
    except (ValueError, KeyError, TypeError):
        raise TokenError("the token is not one this control plane issued") from None
    if not hmac.compare_digest(signature, expected):
        raise TokenError("the token is not one this control plane issued")
    return identity
