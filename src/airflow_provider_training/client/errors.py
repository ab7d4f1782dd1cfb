"""The client's errors: what happened to a waited-for job, and typed API errors.

API errors are typed at one boundary (``translate``): an ``ApiException`` of either official client,
a dropped connection or a timed-out request becomes :class:`NotFound`, :class:`Conflict`,
:class:`Gone`, :class:`Forbidden`, :class:`BadRequest`, :class:`Transient` or (any other answer)
:class:`ApiError`, so callers catch a meaning instead of testing ``exc.status``. An
:class:`ApiError` is also an ``ApiException`` of both ``kubernetes`` and ``kubernetes_asyncio``
(with ``status``, ``reason`` and ``body``), so code that still catches those keeps working.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

import aiohttp
import urllib3
from kubernetes.client.exceptions import ApiException as SyncApiException
from kubernetes_asyncio.client.exceptions import ApiException as AsyncApiException

from airflow_provider_training.specs.refs import ObjectRef


class TrainingJobError(RuntimeError):
    """Base class of the client's errors about one object (``ref``)."""

    kind: str
    namespace: str
    name: str

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.kind, self.namespace, self.name)


class JobNotFound(TrainingJobError):
    def __init__(self, kind: str, namespace: str, name: str) -> None:
        super().__init__(f"{kind} {namespace}/{name} does not exist")
        self.kind, self.namespace, self.name = kind, namespace, name


class JobDeleted(TrainingJobError):
    """The job was deleted (or replaced by another object of the same name) while being waited for."""

    def __init__(self, kind: str, namespace: str, name: str, detail: str = "was deleted while waiting for it") -> None:
        super().__init__(f"{kind} {namespace}/{name} {detail}")
        self.kind, self.namespace, self.name = kind, namespace, name


class WaitTimeout(TrainingJobError):
    def __init__(self, kind: str, namespace: str, name: str, timeout: float, last: dict | None) -> None:
        super().__init__(f"{kind} {namespace}/{name} did not finish within {timeout:g}s")
        self.kind, self.namespace, self.name, self.timeout = kind, namespace, name, timeout
        self.last = last


#: API answers worth retrying: connection failure (0), throttling, server errors.
RETRYABLE_STATUS = (0, 429, 500, 502, 503, 504)
#: Answers to a watch request from a server that cannot watch the resource: poll instead.
CANNOT_WATCH_STATUS = (400, 404, 405, 501)


class ApiError(SyncApiException, AsyncApiException):
    """An answer of the API server other than success (``status`` 0: no answer at all)."""

    def __init__(self, status: int, reason: str = "", body: Any = None) -> None:
        SyncApiException.__init__(self, status=status, reason=reason)
        self.body = body

    @property
    def cannot_watch(self) -> bool:
        return self.status in CANNOT_WATCH_STATUS


class BadRequest(ApiError):
    """400: the request cannot be answered as asked — e.g. the log of a container that has not started."""


class NotFound(ApiError):
    """404: no such object (or resource)."""


class Conflict(ApiError):
    """409: the name is taken, a precondition (uid, resourceVersion) failed, or a write raced another."""


class Gone(ApiError):
    """410: the resourceVersion is older than the server's event history: list (or get) and watch again."""

    def __init__(self, reason: str = "resourceVersion too old", body: Any = None) -> None:
        super().__init__(410, reason, body)


#: Where the provider's least-privilege Roles are (in its repository), named by every 403 it reports.
RBAC_MANIFESTS = "deploy/rbac/airflow-worker.yaml"
# kube-apiserver's words for an RBAC refusal (``responsewriters.forbiddenMessage``)
_RBAC_REFUSAL = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]+)" in API group "(?P<group>[^"]*)" '
    r'(?:in the namespace "(?P<namespace>[^"]*)"|at the cluster scope)'
)


class Forbidden(ApiError):
    """401 / 403: the credentials may not do this. Its text is one sentence: for an RBAC refusal,
    who may not do what where, and the manifest that grants what the provider needs."""

    def __str__(self) -> str:
        return self.sentence

    @property
    def message(self) -> str:
        """The Status message of the answer ("" when the body is not a Status)."""
        body = self.body.decode("utf-8", "replace") if isinstance(self.body, bytes) else self.body
        try:
            status = json.loads(body) if isinstance(body, str) else body
        except ValueError:
            return ""
        return str(status.get("message", "")) if isinstance(status, dict) else ""

    @property
    def sentence(self) -> str:
        message = self.message
        if self.status == 401:
            detail = f" ({message})" if message and message != "Unauthorized" else ""
            return (
                f"The Kubernetes API did not accept the credentials{detail} (401 Unauthorized): check the token or "
                "kubeconfig of the kubernetes connection."
            )
        found = _RBAC_REFUSAL.search(message)
        if found is None:
            return f"The Kubernetes API refused the request (403 Forbidden): {message or self.reason}"
        resource, group = found["resource"], found["group"]
        if group:
            base, _, sub = resource.partition("/")
            resource = f"{base}.{group}/{sub}" if sub else f"{base}.{group}"
        where = f'in namespace "{found["namespace"]}"' if found["namespace"] is not None else "cluster-wide"
        return (
            f"The Kubernetes API refused to let {found['user']} {found['verb']} {resource} {where} (403 Forbidden): "
            f"grant it with this provider's Role in {RBAC_MANIFESTS} (docs/cluster.md, Permissions)."
        )


class Transient(ApiError):
    """Worth retrying: no answer (``status`` 0), throttling, a server error, or a watch the server cut."""


BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Forbidden,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
}


def api_error(status: int, reason: str = "", body: Any = None) -> ApiError:
    """The typed error for an HTTP ``status``."""
    if status == 410:
        return Gone(reason or "resourceVersion too old", body)
    if status in RETRYABLE_STATUS:
        return Transient(status, reason, body)
    return BY_STATUS.get(status, ApiError)(status, reason, body)


#: Failures below HTTP: the request never got an answer.
CONNECTION_ERRORS = (urllib3.exceptions.HTTPError, aiohttp.ClientError, OSError, asyncio.TimeoutError)


def typed(exc: BaseException) -> ApiError | None:
    """``exc`` as a typed API error; None for anything that is not about talking to the server."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, (SyncApiException, AsyncApiException)):
        return api_error(int(exc.status or 0), str(exc.reason or ""), exc.body)
    if isinstance(exc, CONNECTION_ERRORS):
        return Transient(0, f"{type(exc).__name__}: {exc}")
    return None


@contextlib.contextmanager
def translate() -> Iterator[None]:
    """Re-raise what the official clients raise as typed errors (works around ``await`` too)."""
    try:
        yield
    except Exception as exc:  # narrowed by ``typed``: anything else is re-raised as it is
        error = typed(exc)
        if error is None or error is exc:
            raise
        raise error from exc
