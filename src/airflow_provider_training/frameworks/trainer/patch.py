"""Strategic merge patch of a JobSet spec, as ``strategicpatch.StrategicMergePatch`` does it for the
fields a runtime patch may carry (``trainer-v2.md`` §1.2).

Hand-written: no Python library implements Kubernetes' strategic merge. Maps merge key by key
(``null`` deletes a key); lists whose Go type declares a merge key merge item by item on that key
(``replicatedJobs``/``containers``/``env``/``volumes`` by ``name``, ``volumeMounts`` by
``mountPath``, ``ports`` by ``containerPort``); every other list is replaced. ``$patch: delete``
on a list item removes it and ``$patch: replace`` on a map replaces it.
"""

from __future__ import annotations

import copy
from typing import Any

MERGE_KEYS: dict[str, str] = {
    "replicatedJobs": "name",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "hostAliases": "ip",
    "resourceClaims": "name",
}


def merge(original: Any, patch: Any) -> Any:
    """``original`` patched by ``patch``; neither is modified."""
    return _merge(copy.deepcopy(original), copy.deepcopy(patch))


def _merge(original: Any, patch: Any) -> Any:
    if not isinstance(patch, dict) or not isinstance(original, dict):
        return patch
    if patch.get("$patch") == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    for key, value in patch.items():
        if key == "$patch":
            continue
        if value is None:
            original.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(original.get(key), list):
            original[key] = _merge_list(original[key], value, MERGE_KEYS[key])
        elif isinstance(value, dict) and isinstance(original.get(key), dict):
            original[key] = _merge(original[key], value)
        else:
            original[key] = _strip_directives(value)
    return original


def _merge_list(original: list[Any], patch: list[Any], key: str) -> list[Any]:
    out = list(original)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            out.append(item)
            continue
        position = next((i for i, o in enumerate(out) if isinstance(o, dict) and o.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if position is not None:
                out.pop(position)
            continue
        if position is None:
            out.append(_strip_directives(item))
        else:
            out[position] = _merge(out[position], item)
    return out


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if k != "$patch" and v is not None}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
