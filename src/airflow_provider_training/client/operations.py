"""What each client method asks of the API server, written once for both clients (``steps.py``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_training.client.errors import ApiError, Conflict, JobDeleted, JobNotFound, NotFound
from airflow_provider_training.client.logselect import default_container
from airflow_provider_training.client.resources import Resource, resource_for
from airflow_provider_training.client.selection import pod_selector, sorted_events
from airflow_provider_training.client.state import main_container, replica_of_job
from airflow_provider_training.client.steps import Call, Read, Steps, core, custom

Timeout = tuple[float, float]
Objects = list[dict[str, Any]]
Logs = list[tuple[str, str]]  # (pod, text)


def _on(res: Resource, namespace: str) -> tuple[str, str, str, str]:
    return res.group, res.version, namespace, res.plural


def create(body: Mapping[str, Any], namespace: str | None, timeout: Timeout) -> Steps[dict[str, Any]]:
    res = resource_for(str(body.get("kind")))
    ns = namespace or (body.get("metadata") or {}).get("namespace") or "default"
    created: dict[str, Any] = yield custom(
        "create_namespaced_custom_object", *_on(res, ns), dict(body), _request_timeout=timeout
    )
    return created


def get(kind: str, name: str, namespace: str, timeout: Timeout) -> Steps[dict[str, Any]]:
    res = resource_for(kind)
    try:
        found: dict[str, Any] = yield custom(
            "get_namespaced_custom_object", *_on(res, namespace), name, _request_timeout=timeout
        )
    except NotFound:
        raise JobNotFound(kind, namespace, name) from None
    return found


def find(kind: str, name: str, namespace: str, timeout: Timeout) -> Steps[dict[str, Any] | None]:
    try:
        return (yield from get(kind, name, namespace, timeout))
    except JobNotFound:
        return None


def list_(kind: str, namespace: str, label_selector: str | None, timeout: Timeout) -> Steps[Objects]:
    res = resource_for(kind)
    listed = yield custom(
        "list_namespaced_custom_object",
        *_on(res, namespace),
        label_selector=label_selector or "",
        _request_timeout=timeout,
    )
    return list(listed.get("items") or [])


def patch_labels(
    kind: str, name: str, namespace: str, labels: Mapping[str, str | None], timeout: Timeout
) -> Steps[dict[str, Any]]:
    res = resource_for(kind)
    patched: dict[str, Any] = yield custom(
        "patch_namespaced_custom_object",
        *_on(res, namespace),
        name,
        {"metadata": {"labels": dict(labels)}},
        _request_timeout=timeout,
    )
    return patched


def delete(kind: str, name: str, namespace: str, propagation: str, uid: str | None, timeout: Timeout) -> Steps[bool]:
    res = resource_for(kind)
    body: dict[str, Any] = {"propagationPolicy": propagation}
    if uid:
        body["preconditions"] = {"uid": uid}
    try:
        yield custom("delete_namespaced_custom_object", *_on(res, namespace), name, body=body, _request_timeout=timeout)
    except (NotFound, Conflict):  # gone, or the name now belongs to another object
        return False
    return True


def current(
    kind: str, name: str, namespace: str, uid: str | None, timeout: Timeout
) -> Steps[tuple[dict[str, Any], str]]:
    """The job and the resourceVersion to watch from: a LIST's, which is current even when the
    object itself has not changed for longer than the server's watch history reaches (a GET's
    resourceVersion would be answered with 410 again)."""
    res = resource_for(kind)
    listed = yield custom(
        "list_namespaced_custom_object",
        *_on(res, namespace),
        field_selector=f"metadata.name={name}",
        _request_timeout=timeout,
    )
    items = listed.get("items") or []
    if not items:
        raise JobDeleted(kind, namespace, name)
    obj: dict[str, Any] = items[0]
    if uid and obj["metadata"].get("uid") != uid:
        raise JobDeleted(kind, namespace, name, "was replaced by another object of the same name")
    obj.setdefault("kind", kind)
    obj.setdefault("apiVersion", res.api_version)
    version = (listed.get("metadata") or {}).get("resourceVersion") or obj["metadata"].get("resourceVersion", "")
    return obj, str(version)


def watch(res: Resource, name: str, namespace: str, resource_version: str, seconds: float) -> Steps[Any]:
    """Open a watch of one object from ``resource_version`` that the server ends after ``seconds``;
    the answer is the stream's first line (then the caller reads on)."""
    return (yield from watch_all(res, namespace, resource_version, seconds, field_selector=f"metadata.name={name}"))


def _collection(res: Resource, namespace: str, read: Read, selectors: Mapping[str, str], **kwargs: Any) -> Call:
    """A LIST (with ``watch=True``: a watch) of ``res`` in ``namespace``; core kinds (pods, events)
    through ``CoreV1Api``, everything else as a custom object. Empty selectors are left out."""
    kwargs.update({k: v for k, v in selectors.items() if v})
    if res.group:
        return custom("list_namespaced_custom_object", *_on(res, namespace), read=read, **kwargs)
    return core(f"list_namespaced_{res.singular}", namespace, read=read, **kwargs)


def list_all(
    res: Resource, namespace: str, timeout: Timeout, *, label_selector: str = "", field_selector: str = ""
) -> Steps[tuple[Objects, str]]:
    """The selected objects of ``res`` in ``namespace`` (each with its ``kind``) and the list's
    resourceVersion, to watch from."""
    selectors = {"label_selector": label_selector, "field_selector": field_selector}
    listed = yield _collection(res, namespace, "json", selectors, _request_timeout=timeout)
    items = list(listed.get("items") or [])
    for item in items:  # a LIST's items carry no kind; a watch's objects do
        item.setdefault("kind", res.kind)
        item.setdefault("apiVersion", res.api_version)
    return items, str((listed.get("metadata") or {}).get("resourceVersion") or "")


def watch_all(
    res: Resource,
    namespace: str,
    resource_version: str,
    seconds: float,
    *,
    label_selector: str = "",
    field_selector: str = "",
) -> Steps[Any]:
    """Open a watch of the selected objects of ``res`` from ``resource_version``, with bookmarks,
    that the server ends after ``seconds``; the answer is the stream's first line."""
    selectors = {"label_selector": label_selector, "field_selector": field_selector}
    return (
        yield _collection(
            res,
            namespace,
            "stream",
            selectors,
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=resource_version,
            timeout_seconds=max(1, int(seconds)),
            _request_timeout=(10.0, seconds + 30.0),
        )
    )


def find_pod(name: str, namespace: str, timeout: Timeout) -> Steps[dict[str, Any] | None]:
    """The pod ``namespace/name``, or None when there is none."""
    try:
        found: dict[str, Any] = yield core(
            "read_namespaced_pod", name, namespace, _request_timeout=timeout, read="json"
        )
    except NotFound:
        return None
    return found


def pods(
    kind: str,
    name: str,
    namespace: str,
    uid: str | None,
    replica_type: str | None,
    index: int | None,
    timeout: Timeout,
) -> Steps[Objects]:
    """The job's pods (for a training job: by replica type and index), sorted by name."""
    listed = yield core(
        "list_namespaced_pod",
        namespace,
        label_selector=pod_selector(kind, name, replica_type, index),
        _request_timeout=timeout,
        read="json",
    )
    items = listed.get("items") or []
    return sorted((p for p in items if replica_of_job(p, kind, uid)), key=lambda p: str(p["metadata"]["name"]))


def list_pods(namespace: str, label_selector: str, timeout: Timeout) -> Steps[Objects]:
    """The pods of ``namespace`` that ``label_selector`` selects (any owner), sorted by name."""
    listed = yield core(
        "list_namespaced_pod", namespace, label_selector=label_selector, _request_timeout=timeout, read="json"
    )
    return sorted(listed.get("items") or [], key=lambda p: str(p["metadata"]["name"]))


def log_options(container: str | None, tail_lines: int | None, **flags: bool) -> dict[str, Any]:
    """``read_namespaced_pod_log``'s keyword arguments; unset ones left out (the server's defaults)."""
    options: dict[str, Any] = {**flags}
    if container:
        options["container"] = container
    if tail_lines is not None:
        options["tail_lines"] = tail_lines
    return options


def read_log(
    pod: str, namespace: str, container: str | None, tail_lines: int | None, previous: bool, timeout: Timeout
) -> Steps[str]:
    kwargs = log_options(container, tail_lines, previous=previous)
    text: str = yield core("read_namespaced_pod_log", pod, namespace, _request_timeout=timeout, read="text", **kwargs)
    return text


def replica_logs(
    kind: str,
    name: str,
    namespace: str,
    uid: str | None,
    select: Callable[[dict[str, Any]], bool],
    tail_lines: int | None,
    timeout: Timeout,
) -> Steps[Logs]:
    """``(pod, text)`` of the job's pods that ``select`` accepts, each the last ``tail_lines`` of its
    main container (the kind's: ``pytorch`` …); a log the server cannot give is a note in its place,
    not an error — what a finished task prints of its replicas."""
    container = default_container(kind)
    logs: Logs = []
    for pod in (yield from pods(kind, name, namespace, uid, None, None, timeout)):
        if not select(pod):
            continue
        pod_name = str(pod["metadata"]["name"])
        try:
            text = yield from read_log(pod_name, namespace, main_container(pod, container), tail_lines, False, timeout)
        except ApiError as exc:
            text = f"(log not available: {exc})"
        logs.append((pod_name, text))
    return logs


def events(kind: str, name: str, namespace: str, uid: str | None, timeout: Timeout) -> Steps[Objects]:
    """Events of the job and of its pods, oldest first."""
    mine = yield core(
        "list_namespaced_event",
        namespace,
        field_selector=f"involvedObject.kind={kind},involvedObject.name={name}",
        _request_timeout=timeout,
        read="json",
    )
    pod_names = {p["metadata"]["name"] for p in (yield from pods(kind, name, namespace, uid, None, None, timeout))}
    of_pods = yield core(
        "list_namespaced_event",
        namespace,
        field_selector="involvedObject.kind=Pod",
        _request_timeout=timeout,
        read="json",
    )
    found = list(mine.get("items") or [])
    found += [e for e in of_pods.get("items") or [] if e["involvedObject"].get("name") in pod_names]
    return sorted_events(found)


def replace(body: Mapping[str, Any], timeout: Timeout) -> Steps[dict[str, Any]]:
    """Write ``body`` over the stored object of its kind, namespace and name (``Conflict`` when its
    resourceVersion is stale)."""
    res = resource_for(str(body.get("kind")))
    meta = body["metadata"]
    replaced: dict[str, Any] = yield custom(
        "replace_namespaced_custom_object",
        *_on(res, meta["namespace"]),
        meta["name"],
        dict(body),
        _request_timeout=timeout,
    )
    return replaced


def apply_secret(body: Mapping[str, Any], timeout: Timeout) -> Steps[None]:
    """Create the Secret ``body``, or replace the one of that name (credentials that changed since)."""
    meta = body["metadata"]
    try:
        yield core("create_namespaced_secret", meta["namespace"], dict(body), _request_timeout=timeout)
    except Conflict:
        yield core("replace_namespaced_secret", meta["name"], meta["namespace"], dict(body), _request_timeout=timeout)
