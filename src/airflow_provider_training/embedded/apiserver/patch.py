"""The three patch types kubectl and the clients send.

JSON patch (RFC 6902) comes from the ``jsonpatch`` library. JSON merge patch (RFC 7386) is ten lines.
Strategic merge patch has no Python library; the subset here follows the merge keys of the core
types this server stores (containers by name, volumeMounts by mountPath, …) and the directives
kubectl emits (``$patch``, ``$setElementOrder``, ``$retainKeys``, ``$deleteFromPrimitiveList``).
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from airflow_provider_training.specs.unstructured import Unstructured

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# list field -> merge key, as in the core types' ``patchMergeKey`` tags
_MERGE_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "ports": ("containerPort", "port"),
    "imagePullSecrets": ("name",),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "hostAliases": ("ip",),
    "topologySpreadConstraints": ("topologyKey",),
}
# primitive lists whose patch strategy is merge (union)
_MERGED_PRIMITIVES = {"finalizers"}


class PatchError(ValueError):
    pass


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Unstructured, operations: Any) -> Unstructured:
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    try:
        patched: Unstructured = jsonpatch.apply_patch(target, operations)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, TypeError) as exc:
        raise PatchError(f"the JSON patch could not be applied: {exc}") from exc
    return patched


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain or k in patch}
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    existing = list(current) if isinstance(current, list) else []
    if field in _MERGED_PRIMITIVES:
        return existing + [v for v in patch if v not in existing]
    keys = _MERGE_KEYS.get(field)
    if not keys or not all(isinstance(item, dict) for item in patch):
        return copy.deepcopy(patch)
    if len(patch) == 1 and patch[0].get("$patch") == "replace":
        return []
    key = next((k for k in keys if any(k in item for item in patch + existing)), keys[0])
    merged = list(existing)
    for item in patch:
        position = next((i for i, old in enumerate(merged) if old.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if position is not None:
                merged.pop(position)
        elif position is None:
            merged.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            merged[position] = strategic_merge_patch(merged[position], item)
    return merged


def apply_patch(content_type: str, target: Unstructured, patch: Any) -> Unstructured:
    media = content_type.split(";")[0].strip()
    if media == JSON_PATCH:
        return json_patch(target, patch)
    if not isinstance(patch, dict):
        raise PatchError("a merge patch must be a JSON object")
    if media == MERGE_PATCH:
        result: dict[str, Any] = merge_patch(target, patch)
        return result
    if media == STRATEGIC_MERGE_PATCH:
        result = strategic_merge_patch(target, patch)
        return result
    raise PatchError(f"unsupported patch type {media!r}")
