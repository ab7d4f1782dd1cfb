"""Authentication: who a request's bearer token is.

- the control plane's own token (the admin kubeconfig's): ``kubernetes-admin`` in ``system:masters``;
- a service-account token this control plane signed (``embedded/serviceaccount.py``): the account's
  user ``system:serviceaccount:<ns>:<name>`` in ``system:serviceaccounts``,
  ``system:serviceaccounts:<ns>`` and ``system:authenticated`` (with the pod's name and uid as
  extra when the token is bound to a pod), while its account exists with the uid it names, its pod
  (if bound) exists with its uid, and it has not expired;
- anything else: 401 with a Status that says why (never the token).

A token that passed is remembered until its pod or account is deleted (a store listener drops it)
or it expires, so a request pays a dict lookup, not two store reads and an HMAC.
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from dataclasses import dataclass

from airflow_provider_training.embedded import serviceaccount
from airflow_provider_training.embedded.apiserver.errors import ApiError
from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.rbac import user as users
from airflow_provider_training.embedded.rbac.user import UserInfo
from airflow_provider_training.embedded.resources import PODS, SERVICE_ACCOUNTS
from airflow_provider_training.embedded.store import Store, WatchEvent

log = logging.getLogger(__name__)
_CACHE_LIMIT = 10_000
Ref = tuple[str, str, str]  # (store resource, namespace, name)


@dataclass(frozen=True)
class _Known:
    user: UserInfo
    refs: tuple[Ref, ...]
    expires: float | None


def unauthorized(detail: str = "") -> ApiError:
    return ApiError(401, "Unauthorized", f"Unauthorized: {detail}" if detail else "Unauthorized")


class Authenticator:
    def __init__(self, store: Store, home: Home, admin_token: str) -> None:
        self.store = store
        self.home = home
        self._admin = admin_token.encode()
        self._known: dict[str, _Known] = {}
        self._by_ref: dict[Ref, set[str]] = {}
        self._lock = threading.Lock()
        self._deletions = 0  # a token checked while this changed is not remembered (its pod may be gone)
        store.subscribe(self._on_event)

    def _on_event(self, event: WatchEvent) -> None:
        if event.type != "DELETED" or event.resource not in (PODS.key, SERVICE_ACCOUNTS.key):
            return
        with self._lock:
            self._deletions += 1
            for token in self._by_ref.pop((event.resource, event.namespace, event.name), ()):
                self._known.pop(token, None)

    def authenticate(self, authorization: str) -> UserInfo:
        scheme, _, presented = authorization.partition(" ")
        token = presented.strip()
        if scheme.lower() != "bearer" or not token:
            raise unauthorized()
        if hmac.compare_digest(token.encode(), self._admin):
            return users.ADMIN
        known = self._known.get(token)
        if known is not None and (known.expires is None or known.expires > time.time()):
            return known.user
        deletions = self._deletions
        user, refs, expires = self._verify(token)
        with self._lock:
            if deletions == self._deletions:
                if len(self._known) >= _CACHE_LIMIT:
                    self._known.clear()
                    self._by_ref.clear()
                self._known[token] = _Known(user, refs, expires)
                for ref in refs:
                    self._by_ref.setdefault(ref, set()).add(token)
        return user

    def _verify(self, token: str) -> tuple[UserInfo, tuple[Ref, ...], float | None]:
        try:
            identity = serviceaccount.verify(self.home.root, token)
        except serviceaccount.TokenError as exc:
            raise unauthorized(str(exc)) from None
        ns = identity.namespace
        account = self.store.get(SERVICE_ACCOUNTS.key, ns, identity.account)
        account_uid = str((account or {}).get("metadata", {}).get("uid", ""))
        if account is None or (identity.account_uid and account_uid != identity.account_uid):
            raise unauthorized(
                f"the service account {ns}/{identity.account} of this token no longer exists "
                "(it was deleted, or deleted and created again)"
            )
        refs: list[Ref] = [(SERVICE_ACCOUNTS.key, ns, identity.account)]
        extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
        if identity.pod:
            pod = self.store.get(PODS.key, ns, identity.pod)
            if pod is None or pod["metadata"].get("uid") != identity.pod_uid:
                log.info("refused the token of deleted pod %s/%s", ns, identity.pod)
                raise unauthorized(
                    f"the service account token of pod {ns}/{identity.pod} is no longer valid (the pod was deleted)"
                )
            refs.append((PODS.key, ns, identity.pod))
            extra = ((users.POD_NAME_EXTRA, (identity.pod,)), (users.POD_UID_EXTRA, (identity.pod_uid,)))
        if identity.token_id:
            extra += ((users.CREDENTIAL_ID_EXTRA, (f"JTI={identity.token_id}",)),)
        user = users.service_account_user(ns, identity.account, account_uid, extra)
        return user, tuple(refs), identity.expires
