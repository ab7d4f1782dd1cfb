"""Pod spec immutability as kube-apiserver's ``ValidatePodUpdate`` enforces it: on an update or
patch of the main resource only the container and init-container images, ``activeDeadlineSeconds``
(set, or lowered), ``tolerations`` (additions) and ``terminationGracePeriodSeconds`` (from a negative
value to 1) may change. Everything else is what the node already runs, so a change would make the
stored pod lie about the process; kube-apiserver answers 422 and so do we, with its message."""

from __future__ import annotations

import copy
import json
from typing import Any

from airflow_provider_training.embedded.apiserver import errors
from airflow_provider_training.embedded.resources import ResourceType
from airflow_provider_training.specs.unstructured import Unstructured

FORBIDDEN = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)
MAX_INT32 = 2**31 - 1


def validate_pod_update(rt: ResourceType, new: Unstructured, old: Unstructured) -> None:
    """Raise kube-apiserver's 422 when ``new`` (defaulted) changes what a pod update may not."""
    name = new["metadata"]["name"]
    spec: dict[str, Any] = new["spec"] if isinstance(new.get("spec"), dict) else {}
    old_spec: dict[str, Any] = old["spec"] if isinstance(old.get("spec"), dict) else {}
    issue = _deadline_issue(spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds"))
    if issue is not None:
        raise _invalid(rt, name, *issue)
    munged = copy.deepcopy(spec)
    for key in ("containers", "initContainers"):
        # images may change one for one; a container added or removed is a spec change
        mine, theirs = munged.get(key), old_spec.get(key)
        if isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
            for container, before in zip(mine, theirs, strict=True):
                if isinstance(container, dict) and isinstance(before, dict):
                    if "image" in before:
                        container["image"] = before["image"]
                    else:
                        container.pop("image", None)
    _keep(munged, old_spec, "activeDeadlineSeconds")
    old_tolerations = old_spec.get("tolerations") or []
    new_tolerations = spec.get("tolerations") or []
    if isinstance(new_tolerations, list) and all(t in new_tolerations for t in old_tolerations):
        _keep(munged, old_spec, "tolerations")
    grace, old_grace = spec.get("terminationGracePeriodSeconds"), old_spec.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and grace == 1:
        _keep(munged, old_spec, "terminationGracePeriodSeconds")
    if munged != old_spec:
        changed = sorted(_differences("spec", munged, old_spec))
        raise _invalid(rt, name, "spec", f"{FORBIDDEN}\n  changed: {', '.join(changed[:10]) or 'spec'}")


def _keep(munged: Unstructured, old_spec: dict[str, Any], key: str) -> None:
    if key in old_spec:
        munged[key] = copy.deepcopy(old_spec[key])
    else:
        munged.pop(key, None)


def _deadline_issue(new: Any, old: Any) -> tuple[str, str] | None:
    field = "spec.activeDeadlineSeconds"
    if new is not None:
        if not isinstance(new, int) or isinstance(new, bool) or not 0 <= new <= MAX_INT32:
            return field, f"Invalid value: {json.dumps(new)}: must be between 0 and {MAX_INT32}, inclusive"
        if isinstance(old, int) and old < new:
            return field, f"Invalid value: {new}: must be less than or equal to previous value"
    elif old is not None:
        return field, "Invalid value: null: must not update from a positive integer to nil value"
    return None


def _differences(path: str, new: Any, old: Any) -> list[str]:
    """The paths that differ, for the line after kube's message (it prints a diff there too)."""
    if isinstance(new, dict) and isinstance(old, dict):
        out: list[str] = []
        for key in sorted(set(new) | set(old)):
            out += _differences(f"{path}.{key}", new.get(key), old.get(key))
        return out
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        out = []
        for i, (a, b) in enumerate(zip(new, old, strict=True)):
            out += _differences(f"{path}[{i}]", a, b)
        return out
    return [] if new == old else [path]


def _invalid(rt: ResourceType, name: str, field: str, message: str) -> errors.ApiError:
    """kube-apiserver's Invalid with one cause: ``Pod "x" is invalid: <field>: <message>`` (one
    error is not bracketed in its aggregate)."""
    error = errors.invalid(rt, name, [(field, message)])
    error.message = f'{rt.kind} "{name}" is invalid: {field}: {message}'
    return error
