"""Server-side ``meta.k8s.io/v1 Table`` answers, so ``kubectl get`` prints the columns it prints on
a cluster: the CRDs' printer columns (STATE, AGE) and the usual columns of the core types."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from airflow_provider_training.embedded.resources import ResourceType
from airflow_provider_training.specs.crds import crd
from airflow_provider_training.specs.trainer.crds import crd as trainer_crd
from airflow_provider_training.specs.unstructured import Unstructured

Cell = Callable[[Unstructured], Any]
Column = tuple[str, str, int, Cell]  # name, type, priority, value


def human_duration(seconds: float) -> str:
    """kubectl's ``duration.HumanDuration``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years = hours // 24 // 365
        return f"{years}y{(hours // 24) % 365}d"
    return f"{hours // 24 // 365}y"


def age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return "<unknown>"
    return human_duration((datetime.now(timezone.utc) - then).total_seconds())


_TOKEN = re.compile(r"\.([A-Za-z0-9_\-]+)|\[(-?\d*):(-?\d*)\]|\[(-?\d+)\]|\[\*\]")


def json_path(obj: Any, path: str) -> list[Any]:
    """The subset of Kubernetes JSONPath that CRD printer columns use: ``.a.b``, ``[i]``, ``[a:b]``,
    ``[*]``. (A full JSONPath library would also accept the ``{…}`` template syntax we never need.)"""
    values = [obj]
    for match in _TOKEN.finditer(path):
        field, start, stop, index = match.groups()
        nxt: list[Any] = []
        for value in values:
            if field is not None:
                if isinstance(value, dict) and field in value:
                    nxt.append(value[field])
            elif isinstance(value, list):
                if index is not None:
                    i = int(index)
                    if -len(value) <= i < len(value):
                        nxt.append(value[i])
                elif start is not None or stop is not None:
                    nxt.extend(value[int(start) if start else None : int(stop) if stop else None])
                else:
                    nxt.extend(value)
        values = nxt
    return values


def _d(obj: Any, key: str) -> dict[str, Any]:
    """``obj[key]`` when it is an object, else {}: a stored field may be null (or anything, written
    around the API), and one such object must not fail the list it is in."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _meta(obj: Unstructured, key: str) -> Any:
    return _d(obj, "metadata").get(key)


def _name(obj: Unstructured) -> Any:
    return _meta(obj, "name")


def _age(obj: Unstructured) -> str:
    return age(_meta(obj, "creationTimestamp"))


NAME: Column = ("Name", "string", 0, _name)
AGE: Column = ("Age", "string", 0, _age)
# What the API server shows for a CRD that declares no printer columns.
AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _pod_status(pod: Unstructured) -> str:
    if _meta(pod, "deletionTimestamp"):
        return "Terminating"
    status = _d(pod, "status")
    reason = status.get("reason") or status.get("phase") or "Pending"
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            term = state["terminated"]
            reason = term.get("reason") or (
                f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}"
            )
    return str(reason)


def _pod_ready(pod: Unstructured) -> str:
    containers = _d(pod, "spec").get("containers") or []
    ready = sum(1 for cs in _d(pod, "status").get("containerStatuses") or [] if cs.get("ready"))
    return f"{ready}/{len(containers)}"


def _pod_restarts(pod: Unstructured) -> int:
    return sum(int(cs.get("restartCount", 0)) for cs in _d(pod, "status").get("containerStatuses") or [])


def _ports(svc: Unstructured) -> str:
    ports = _d(svc, "spec").get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _job_status(job: Unstructured) -> str:
    for cond in _d(job, "status").get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed", "Suspended"):
            return str(cond["type"])
    return "Running"


_BUILTIN: dict[str, list[Column]] = {
    "core/pods": [
        NAME,
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, _pod_status),
        ("Restarts", "string", 0, _pod_restarts),
        AGE,
        ("IP", "string", 1, lambda p: _d(p, "status").get("podIP") or "<none>"),
        ("Node", "string", 1, lambda p: _d(p, "spec").get("nodeName") or "<none>"),
        ("Nominated Node", "string", 1, lambda p: "<none>"),
        ("Readiness Gates", "string", 1, lambda p: "<none>"),
    ],
    "core/namespaces": [
        NAME,
        ("Status", "string", 0, lambda o: _d(o, "status").get("phase", "Active")),
        AGE,
    ],
    "core/services": [
        NAME,
        ("Type", "string", 0, lambda s: _d(s, "spec").get("type", "ClusterIP")),
        ("Cluster-IP", "string", 0, lambda s: _d(s, "spec").get("clusterIP") or "None"),
        ("External-IP", "string", 0, lambda s: "<none>"),
        ("Port(s)", "string", 0, _ports),
        AGE,
    ],
    "core/events": [
        (
            "Last Seen",
            "string",
            0,
            lambda e: age(e.get("lastTimestamp") or e.get("eventTime") or _meta(e, "creationTimestamp")),
        ),
        ("Type", "string", 0, lambda e: e.get("type", "")),
        ("Reason", "string", 0, lambda e: e.get("reason", "")),
        (
            "Object",
            "string",
            0,
            lambda e: (
                f"{str(_d(e, 'involvedObject').get('kind', '')).lower()}/{_d(e, 'involvedObject').get('name', '')}"
            ),
        ),
        ("Message", "string", 0, lambda e: e.get("message", "")),
    ],
    "core/configmaps": [
        NAME,
        ("Data", "string", 0, lambda c: len(c.get("data") or {}) + len(c.get("binaryData") or {})),
        AGE,
    ],
    "core/secrets": [
        NAME,
        ("Type", "string", 0, lambda s: s.get("type", "Opaque")),
        ("Data", "string", 0, lambda s: len(s.get("data") or {})),
        AGE,
    ],
    "core/persistentvolumeclaims": [
        NAME,
        ("Status", "string", 0, lambda c: _d(c, "status").get("phase", "Pending")),
        ("Volume", "string", 0, lambda c: _d(c, "spec").get("volumeName", "")),
        ("Capacity", "string", 0, lambda c: _d(_d(c, "status"), "capacity").get("storage", "")),
        (
            "Access Modes",
            "string",
            0,
            lambda c: ",".join(
                {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX"}.get(m, m)
                for m in _d(c, "status").get("accessModes") or []
            ),
        ),
        ("StorageClass", "string", 0, lambda c: _d(c, "spec").get("storageClassName", "")),
        AGE,
    ],
    "batch/jobs": [
        NAME,
        ("Status", "string", 0, _job_status),
        (
            "Completions",
            "string",
            0,
            lambda j: f"{_d(j, 'status').get('succeeded', 0)}/{_d(j, 'spec').get('completions', 1)}",
        ),
        AGE,
    ],
    "apiextensions.k8s.io/customresourcedefinitions": [
        NAME,
        ("Created At", "date", 0, lambda c: _meta(c, "creationTimestamp")),
    ],
    "core/serviceaccounts": [
        NAME,
        ("Secrets", "string", 0, lambda a: len(a["secrets"]) if isinstance(a.get("secrets"), list) else 0),
        AGE,
    ],
    "rbac.authorization.k8s.io/roles": [NAME, ("Created At", "string", 0, lambda r: _meta(r, "creationTimestamp"))],
    "rbac.authorization.k8s.io/clusterroles": [
        NAME,
        ("Created At", "string", 0, lambda r: _meta(r, "creationTimestamp")),
    ],
    "rbac.authorization.k8s.io/rolebindings": [
        NAME,
        (
            "Role",
            "string",
            0,
            lambda b: f"{_d(b, 'roleRef').get('kind')}/{_d(b, 'roleRef').get('name')}",
        ),
        AGE,
        ("Users", "string", 1, lambda b: _subjects(b, "User")),
        ("Groups", "string", 1, lambda b: _subjects(b, "Group")),
        ("ServiceAccounts", "string", 1, lambda b: _subjects(b, "ServiceAccount")),
    ],
}
# (kubectl's printers show the same columns for ClusterRoleBindings)
_BUILTIN["rbac.authorization.k8s.io/clusterrolebindings"] = _BUILTIN["rbac.authorization.k8s.io/rolebindings"]


def _subjects(binding: Unstructured, kind: str) -> str:
    """``printRoleBinding``'s USERS / GROUPS / SERVICEACCOUNTS cells (``SubjectsStrings``: an
    account as ``namespace/name``, or its name when the subject names no namespace)."""
    found = []
    subjects = binding.get("subjects")
    for s in subjects if isinstance(subjects, list) else []:
        if isinstance(s, dict) and s.get("kind") == kind:
            namespace = s.get("namespace") if kind == "ServiceAccount" else ""
            found.append(f"{namespace}/{s.get('name')}" if namespace else str(s.get("name")))
    return ", ".join(found)


def columns_for(rt: ResourceType) -> list[Column]:
    definition = crd(rt.training_job) if rt.training_job is not None else None
    if rt.trainer is not None:
        definition = trainer_crd(rt.trainer)
    if definition is not None:
        columns: list[Column] = [NAME]
        printer = definition["spec"]["versions"][0].get("additionalPrinterColumns") or [AGE_COLUMN]
        for col in printer:
            path, kind = col["jsonPath"], col.get("type", "string")
            cell = _age_at(path) if kind == "date" else _value_at(path)
            columns.append((col["name"], kind, col.get("priority", 0), cell))
        return columns
    return _BUILTIN.get(rt.key, [NAME, AGE])


def _age_at(path: str) -> Cell:
    return lambda obj: age(_first(obj, path))


def _value_at(path: str) -> Cell:
    return lambda obj: _first(obj, path)


def _first(obj: Unstructured, path: str) -> Any:
    values = json_path(obj, path)
    return values[0] if values else None


def to_table(
    rt: ResourceType, items: list[Unstructured], list_meta: dict[str, Any], include_object: str = "Metadata"
) -> dict[str, Any]:
    columns = columns_for(rt)
    rows = []
    for item in items:
        if include_object == "Object":
            embedded: Any = item
        elif include_object == "None":
            embedded = None
        else:
            embedded = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": _d(item, "metadata"),
            }
        row: dict[str, Any] = {"cells": [fn(item) for _, _, _, fn in columns]}
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": [
            {
                "name": name,
                "type": "string" if kind == "date" and (rt.training_job or rt.trainer) else kind,
                "format": "name" if name == "Name" else "",
                "description": "",
                "priority": priority,
            }
            for name, kind, priority, _ in columns
        ],
        "rows": rows,
    }
