"""``TrainingJobClient``: the training jobs (and batch Jobs, InferenceServices) of any kubeconfig,
through the official ``kubernetes`` client.

Waiting is watch-based: one long watch request per ``watch_timeout`` seconds while nothing changes,
continued from the last resourceVersion (bookmarks included), a fresh GET after ``410 Gone``, and a
GET after a dropped connection. Where the server cannot watch, the client polls every
``poll_interval`` seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException
from kubernetes.watch.watch import iter_resp_lines

from airflow_provider_training.client.errors import RETRYABLE_STATUS, JobDeleted, JobNotFound, WaitTimeout
from airflow_provider_training.client.resources import Resource, resource_for
from airflow_provider_training.client.selection import pod_selector, sorted_events
from airflow_provider_training.client.state import finished, owned_by
from airflow_provider_training.client.watching import Cursor, Gone, WatchError, parse_event

Predicate = Callable[[dict[str, Any]], bool]
Objects = list[dict[str, Any]]  # (the clients have a method called ``list``)
TRANSIENT = (urllib3.exceptions.HTTPError, OSError)


def transient(exc: BaseException) -> bool:
    """Worth retrying: connection trouble, a server error, throttling or a watch the server cut."""
    if isinstance(exc, ApiException):
        return exc.status in RETRYABLE_STATUS
    return isinstance(exc, (*TRANSIENT, WatchError))


class TrainingJobClient:
    """Create, get, list, delete and wait for jobs; their pods, logs and events.

    ``api_client`` is a configured ``kubernetes.client.ApiClient`` (the hooks build one from an
    Airflow connection or the embedded control plane's kubeconfig).
    """

    def __init__(
        self,
        api_client: k8s.ApiClient,
        *,
        watch_timeout: float = 240.0,
        poll_interval: float = 10.0,
        request_timeout: float = 60.0,
    ) -> None:
        self.api_client = api_client
        self.custom = k8s.CustomObjectsApi(api_client)
        self.core = k8s.CoreV1Api(api_client)
        self.watch_timeout = watch_timeout
        self.poll_interval = poll_interval
        self.request_timeout = request_timeout
        self.can_watch = True

    @property
    def _timeout(self) -> tuple[float, float]:
        return (10.0, self.request_timeout)

    # -- objects ---------------------------------------------------------------------------------

    def create(self, body: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Create ``body`` (a job document as a dict); returns the stored object with its uid."""
        res = resource_for(str(body.get("kind")))
        ns = namespace or (body.get("metadata") or {}).get("namespace") or "default"
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            res.group, res.version, ns, res.plural, dict(body), _request_timeout=self._timeout
        )
        return created

    def find(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        res = resource_for(kind)
        try:
            found: dict[str, Any] = self.custom.get_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, name, _request_timeout=self._timeout
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        found = self.find(kind, name, namespace)
        if found is None:
            raise JobNotFound(kind, namespace, name)
        return found

    def list(self, kind: str, namespace: str, label_selector: str | None = None) -> Objects:
        res = resource_for(kind)
        listed = self.custom.list_namespaced_custom_object(
            res.group,
            res.version,
            namespace,
            res.plural,
            label_selector=label_selector or "",
            _request_timeout=self._timeout,
        )
        return list(listed.get("items") or [])

    def patch_labels(self, kind: str, name: str, namespace: str, labels: Mapping[str, str | None]) -> dict[str, Any]:
        res = resource_for(kind)
        patched: dict[str, Any] = self.custom.patch_namespaced_custom_object(
            res.group,
            res.version,
            namespace,
            res.plural,
            name,
            {"metadata": {"labels": dict(labels)}},
            _request_timeout=self._timeout,
        )
        return patched

    def delete(
        self, kind: str, name: str, namespace: str, *, propagation: str = "Foreground", uid: str | None = None
    ) -> bool:
        """Delete the job and (by ``propagation``) its pods. ``uid`` makes sure it is *that* job.
        Returns False when there was nothing to delete."""
        res = resource_for(kind)
        body: dict[str, Any] = {"propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.custom.delete_namespaced_custom_object(
                res.group, res.version, namespace, res.plural, name, body=body, _request_timeout=self._timeout
            )
        except ApiException as exc:
            if exc.status in (404, 409):  # gone, or the name now belongs to another object
                return False
            raise
        return True

    # -- waiting ---------------------------------------------------------------------------------

    def _current(self, kind: str, name: str, namespace: str, uid: str | None) -> tuple[dict[str, Any], str]:
        """The job and the resourceVersion to watch from: a LIST's, which is current even when the
        object itself has not changed for longer than the server's watch history reaches (a GET's
        resourceVersion would be answered with 410 again)."""
        res = resource_for(kind)
        listed = self.custom.list_namespaced_custom_object(
            res.group,
            res.version,
            namespace,
            res.plural,
            field_selector=f"metadata.name={name}",
            _request_timeout=self._timeout,
        )
        items = listed.get("items") or []
        if not items:
            raise JobDeleted(kind, namespace, name)
        obj: dict[str, Any] = items[0]
        if uid and obj["metadata"].get("uid") != uid:
            raise JobDeleted(kind, namespace, name, "was replaced by another object of the same name")
        obj.setdefault("kind", kind)
        obj.setdefault("apiVersion", res.api_version)
        return obj, str(
            (listed.get("metadata") or {}).get("resourceVersion") or obj["metadata"].get("resourceVersion", "")
        )

    def watch_object(
        self, res: Resource, name: str, namespace: str, cursor: Cursor, seconds: float
    ) -> Iterator[dict[str, Any]]:
        """The object's new versions until the server ends the watch after ``seconds``;
        raises :class:`JobDeleted` on a DELETED event and :class:`Gone` when the cursor expired."""
        response = self.custom.list_namespaced_custom_object(
            res.group,
            res.version,
            namespace,
            res.plural,
            field_selector=f"metadata.name={name}",
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=cursor.resource_version,
            timeout_seconds=max(1, int(seconds)),
            _preload_content=False,
            _request_timeout=(10.0, seconds + 30.0),
        )
        try:
            for line in iter_resp_lines(response):
                event = parse_event(line, cursor)
                if event is None:
                    continue
                kind, obj = event
                if kind == "DELETED":
                    raise JobDeleted(res.kind, namespace, name)
                yield obj
        finally:
            response.release_conn()

    def wait(
        self,
        kind: str,
        name: str,
        namespace: str,
        *,
        uid: str | None = None,
        timeout: float | None = None,
        until: Predicate = finished,
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Block until ``until(job)`` holds (default: finished) and return the job.

        Raises :class:`WaitTimeout` after ``timeout`` seconds, :class:`JobDeleted` if the job
        disappears or its uid is no longer ``uid``.
        """
        res = resource_for(kind)
        deadline = None if timeout is None else time.monotonic() + timeout
        obj, version = self._current(kind, name, namespace, uid)
        cursor = Cursor(version)
        backoff, stale, gone = 0.5, False, False
        while True:
            if stale:  # after a dropped watch, a 410 or a poll interval: read the job again
                try:
                    obj, cursor.resource_version = self._current(kind, name, namespace, uid)
                    stale = False
                except Exception as exc:
                    if not transient(exc):
                        raise
                    if deadline is not None and time.monotonic() >= deadline:
                        raise WaitTimeout(kind, namespace, name, float(timeout or 0), obj) from exc
                    time.sleep(backoff)
                    backoff = min(backoff * 2, self.poll_interval)
                    continue
            if on_change is not None:
                on_change(obj)
            if until(obj):
                return obj
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise WaitTimeout(kind, namespace, name, float(timeout or 0), obj)
            window = self.watch_timeout if remaining is None else min(self.watch_timeout, remaining)
            if not self.can_watch:
                time.sleep(min(self.poll_interval, window))
                stale = True
                continue
            try:
                for new in self.watch_object(res, name, namespace, cursor, window):
                    if uid and new["metadata"].get("uid") != uid:
                        raise JobDeleted(kind, namespace, name, "was replaced by another object of the same name")
                    obj = new
                    backoff, gone = 0.5, False
                    if on_change is not None:
                        on_change(obj)
                    if until(obj):
                        return obj
                    if deadline is not None and time.monotonic() >= deadline:
                        break
                # The server ended the watch at its timeout: continue from the cursor, no read needed.
            except Gone:
                if gone:  # a second 410 in a row: the server is struggling, do not hammer it
                    time.sleep(backoff)
                    backoff = min(backoff * 2, self.poll_interval)
                gone, stale = True, True
            except Exception as exc:
                if isinstance(exc, ApiException) and exc.status in (400, 404, 405, 501):
                    self.can_watch = False  # this server cannot watch the resource: poll
                elif not transient(exc):
                    raise
                time.sleep(backoff)
                backoff = min(backoff * 2, self.poll_interval)
                stale = True

    # -- pods, logs, events ----------------------------------------------------------------------

    def pods(
        self,
        kind: str,
        name: str,
        namespace: str,
        *,
        uid: str | None = None,
        replica_type: str | None = None,
        index: int | None = None,
    ) -> Objects:
        """The job's pods (for a training job: by replica type and index), sorted by name."""
        response = self.core.list_namespaced_pod(
            namespace,
            label_selector=pod_selector(kind, name, replica_type, index),
            _preload_content=False,
            _request_timeout=self._timeout,
        )
        items = json.loads(response.data).get("items") or []
        return sorted((p for p in items if owned_by(p, uid)), key=lambda p: str(p["metadata"]["name"]))

    def read_log(
        self,
        pod: str,
        namespace: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        kwargs: dict[str, Any] = {"previous": previous}
        if container:
            kwargs["container"] = container
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        response = self.core.read_namespaced_pod_log(
            pod, namespace, _preload_content=False, _request_timeout=self._timeout, **kwargs
        )
        return str(response.data.decode("utf-8", "replace"))

    def stream_log(self, pod: str, namespace: str, *, container: str | None = None) -> Any:
        """An open ``follow=true`` log response (urllib3); read it with ``iter_resp_lines``."""
        kwargs: dict[str, Any] = {"container": container} if container else {}
        return self.core.read_namespaced_pod_log(
            pod, namespace, follow=True, _preload_content=False, _request_timeout=(10.0, None), **kwargs
        )

    def events(self, kind: str, name: str, namespace: str, *, uid: str | None = None) -> Objects:
        """Events of the job and of its pods, oldest first."""
        mine = self.core.list_namespaced_event(
            namespace,
            field_selector=f"involvedObject.kind={kind},involvedObject.name={name}",
            _preload_content=False,
            _request_timeout=self._timeout,
        )
        pod_names = {p["metadata"]["name"] for p in self.pods(kind, name, namespace, uid=uid)}
        of_pods = self.core.list_namespaced_event(
            namespace, field_selector="involvedObject.kind=Pod", _preload_content=False, _request_timeout=self._timeout
        )
        events = json.loads(mine.data).get("items") or []
        events += [
            e for e in json.loads(of_pods.data).get("items") or [] if e["involvedObject"].get("name") in pod_names
        ]
        return sorted_events(events)
