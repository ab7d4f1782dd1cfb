"""Requests from inside pods: a bearer token that is a pod's service-account token
(``embedded/serviceaccount.py``) is accepted while its pod exists; otherwise 401 with a Status that
says why (never the token). No RBAC: a pod may do what the control plane's own user may."""

from __future__ import annotations

import logging

from airflow_provider_training.embedded import serviceaccount
from airflow_provider_training.embedded.apiserver.context import ServerContext
from airflow_provider_training.embedded.apiserver.errors import ApiError
from airflow_provider_training.embedded.resources import PODS

log = logging.getLogger(__name__)


def check(ctx: ServerContext, authorization: str) -> None:
    """Return if ``authorization`` carries a live pod's token; raise the 401 otherwise."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "Unauthorized", "Unauthorized")
    try:
        identity = serviceaccount.verify(ctx.home.root, token.strip())
    except serviceaccount.TokenError as exc:
        raise ApiError(401, "Unauthorized", f"Unauthorized: {exc}") from None
    pod = ctx.store.get(PODS.key, identity.namespace, identity.pod)
    if pod is None or pod["metadata"].get("uid") != identity.uid:
        log.info("refused the token of deleted pod %s/%s", identity.namespace, identity.pod)
        raise ApiError(
            401,
            "Unauthorized",
            f"Unauthorized: the service account token of pod {identity.namespace}/{identity.pod} "
            "is no longer valid (the pod was deleted)",
        )
