"""Service accounts: their tokens, and the ``default`` account every namespace has.

A token is a JWT (HS256) signed with a key of this data directory (``<home>/serviceaccount.key``)
naming its service account (namespace, name, uid), like the bound tokens of a cluster. Two kinds:

- a pod's token (what the kubelet mounts at ``/var/run/secrets/kubernetes.io/serviceaccount/token``):
  bound to the pod (name, uid), accepted while that pod exists with that uid. It does not expire
  while its pod lives (the kubelet would rotate it hourly; nothing here needs to).
- a TokenRequest's (``kubectl create token SA --duration 1h``): it expires (``exp``), and may be
  bound to a pod.
- a projected ``serviceAccountToken`` with an ``audience`` of its own (Trainer's status token): bound
  to its pod, for that audience only, expiring after the projection's ``expirationSeconds``.

Both are accepted only while their service account exists with the uid they name, and only for the
API server's audience. One this control plane did not sign is refused.

The JWT is three base64url parts and an HMAC (standard library only).
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

from airflow_provider_training.embedded.store import AlreadyExistsError, Store
from airflow_provider_training.specs.unstructured import Unstructured

MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_ACCOUNT = "default"
ACCOUNTS_KEY = "core/serviceaccounts"
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


def account_of(pod: Unstructured) -> str:
    return (pod.get("spec") or {}).get("serviceAccountName") or DEFAULT_ACCOUNT


def mint(home_root: Path, pod: Unstructured, account_uid: str = "") -> str:
    """The token of ``pod`` (bound to it), naming its service account (and that account's uid)."""
    meta = pod["metadata"]
    return _sign(
        home_root,
        meta["namespace"],
        account_of(pod),
        account_uid,
        audiences=[ISSUER],
        pod=(meta["name"], meta["uid"]),
    )


def mint_request(
    home_root: Path,
    namespace: str,
    account: str,
    account_uid: str,
    audiences: list[str],
    expires: int,
    pod: tuple[str, str] | None = None,
) -> str:
    """A TokenRequest's token: valid until ``expires`` (unix seconds), optionally bound to a pod."""
    return _sign(home_root, namespace, account, account_uid, audiences=audiences, pod=pod, expires=expires)


def _sign(
    home_root: Path,
    namespace: str,
    account: str,
    account_uid: str,
    *,
    audiences: list[str],
    pod: tuple[str, str] | None,
    expires: int | None = None,
) -> str:
    now = int(time.time())
    info: dict[str, Any] = {"namespace": namespace, "serviceaccount": {"name": account}}
    if account_uid:
        info["serviceaccount"]["uid"] = account_uid
    if pod is not None:
        info["pod"] = {"name": pod[0], "uid": pod[1]}
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "sub": f"system:serviceaccount:{namespace}:{account}",
        "aud": audiences,
        "iat": now,
        "nbf": now,
        "jti": secrets.token_hex(16),
        "kubernetes.io": info,
    }
    if expires is not None:
        claims["exp"] = expires
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = hmac.new(signing_key(home_root), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


@dataclass(frozen=True)
class TokenIdentity:
    namespace: str
    account: str
    account_uid: str  # "": a pod token minted before its account existed (or before accounts were objects)
    pod: str  # "": not bound to a pod
    pod_uid: str
    expires: int | None  # unix seconds; None: a pod's token, valid while its pod lives
    token_id: str


class TokenError(ValueError):
    pass


NOT_OURS = "the token is not one this control plane issued"


def verify(home_root: Path, token: str, now: float | None = None, audience: str = ISSUER) -> TokenIdentity:
    """Who a token names; raises TokenError if this control plane did not sign it, it is not for
    ``audience`` (by default this API server's), or it expired."""
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError(NOT_OURS)
    expected = hmac.new(signing_key(home_root), f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
    try:
        signature = _unb64(parts[2])
    except ValueError:
        raise TokenError(NOT_OURS) from None
    if not hmac.compare_digest(signature, expected):
        raise TokenError(NOT_OURS)
    try:
        claims = json.loads(_unb64(parts[1]))
        info = claims["kubernetes.io"]
        pod = info.get("pod") or {}
        expires = claims.get("exp")
        identity = TokenIdentity(
            str(info["namespace"]),
            str(info["serviceaccount"]["name"]),
            str(info["serviceaccount"].get("uid", "")),
            str(pod.get("name", "")),
            str(pod.get("uid", "")),
            int(expires) if expires is not None else None,
            str(claims.get("jti", "")),
        )
        audiences = claims.get("aud") or []
        audiences = [str(a) for a in audiences] if isinstance(audiences, list) else [str(audiences)]
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError):  # (OverflowError: "exp": Infinity)
        raise TokenError(NOT_OURS) from None
    if audience not in audiences:
        who = "this API server" if audience == ISSUER else audience
        raise TokenError(f"the token's audiences ({', '.join(audiences)[:200]}) do not include {who}")
    if identity.expires is not None and identity.expires <= (time.time() if now is None else now):
        try:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(identity.expires))
        except (OverflowError, OSError, ValueError):  # a time before the calendar's range
            stamp = str(identity.expires)[:40]
        raise TokenError(f"the token expired at {stamp}: request a new one (kubectl create token)")
    return identity


# -- the default service account --------------------------------------------------------------------


def default_account(namespace: str) -> Unstructured:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT_ACCOUNT, "namespace": namespace}}


def ensure_default(store: Store, namespace: str) -> Unstructured | None:
    """Create ``namespace``'s ``default`` account unless it has one (the serviceaccounts controller
    of kube-controller-manager does this for every namespace); returns the account it created."""
    if store.get(ACCOUNTS_KEY, namespace, DEFAULT_ACCOUNT) is not None:
        return None
    try:
        return store.create(ACCOUNTS_KEY, default_account(namespace))
    except AlreadyExistsError:
        return None


def automounts(store: Store, pod: Unstructured) -> bool:
    """``shouldAutomount``: whether a new pod gets its account's token mounted — the pod's own
    ``automountServiceAccountToken`` if set, else its account's, else yes."""
    spec = pod.get("spec") or {}
    if isinstance(spec.get("automountServiceAccountToken"), bool):
        return bool(spec["automountServiceAccountToken"])
    namespace = (pod.get("metadata") or {}).get("namespace", "")
    account = store.get(ACCOUNTS_KEY, namespace, account_of(pod)) or {}
    return account.get("automountServiceAccountToken") is not False
