"""Field ownership (``metadata.managedFields``), as server-side apply keeps it.

A field set is the set of paths to the leaves an object sets: ``("f:spec", "f:replicas")``; list
elements with a merge key are addressed by it (``k:{"name":"main"}``, with a ``.`` entry for the
element itself); other lists and scalars are leaves. Stored as ``FieldsV1`` (a trie of those
names), exactly the format kube-apiserver writes, so kubectl and the clients read it.

Creates and updates record their manager (``fieldManager``, else derived from the user agent) with
operation ``Update`` over the fields they set or changed; applies record ``Apply`` entries. That is
what apply conflicts are computed against (``apply.py``).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from airflow_provider_training.embedded.apiserver.patch import _MERGE_KEYS
from airflow_provider_training.specs.unstructured import Unstructured

Path = tuple[str, ...]
ELEMENT = "."
_IGNORED_META = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_key(field: str, items: list[Any]) -> str | None:
    keys = _MERGE_KEYS.get(field)
    if not keys or not items or not all(isinstance(i, dict) for i in items):
        return None
    return next((k for k in keys if all(k in i for i in items)), None)


def element_name(key: str, value: Any) -> str:
    return "k:" + json.dumps({key: value}, separators=(",", ":"))


def field_set(obj: Unstructured) -> set[Path]:
    out: set[Path] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "status"):
            continue
        if key == "metadata" and isinstance(value, dict):
            for mkey, mvalue in value.items():
                if mkey not in _IGNORED_META:
                    _walk(mvalue, ("f:metadata", f"f:{mkey}"), mkey, out)
            continue
        _walk(value, (f"f:{key}",), key, out)
    return out


def _walk(value: Any, path: Path, field: str, out: set[Path]) -> None:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            _walk(child, (*path, f"f:{key}"), key, out)
        return
    if isinstance(value, list):
        key = merge_key(field, value)
        if key is not None:
            for item in value:
                element = (*path, element_name(key, item[key]))
                out.add((*element, ELEMENT))
                for child_key, child in item.items():
                    _walk(child, (*element, f"f:{child_key}"), child_key, out)
            return
    out.add(path)


def value_at(obj: Any, path: Path) -> tuple[bool, Any]:
    """(present, value) of ``path`` in ``obj``."""
    current = obj
    for part in path:
        if part == ELEMENT:
            return True, None
        if part.startswith("f:") and isinstance(current, dict):
            if part[2:] not in current:
                return False, None
            current = current[part[2:]]
        elif part.startswith("k:") and isinstance(current, list):
            ((key, wanted),) = json.loads(part[2:]).items()
            found = [i for i in current if isinstance(i, dict) and i.get(key) == wanted]
            if not found:
                return False, None
            current = found[0]
        else:
            return False, None
    return True, current


def remove_path(obj: Any, path: Path) -> None:
    """Remove the field (or keyed list element, for a path ending in ``.``) at ``path``."""
    if path and path[-1] == ELEMENT:
        path = path[:-1]
    present, parent = value_at(obj, path[:-1])
    if not present:
        return
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list):
        ((key, wanted),) = json.loads(last[2:]).items()
        parent[:] = [i for i in parent if not (isinstance(i, dict) and i.get(key) == wanted)]


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    trie: dict[str, Any] = {}
    for path in sorted(paths):
        node = trie
        for part in path:
            node = node.setdefault(part, {})
    return trie


def from_fields_v1(trie: Any, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    if not isinstance(trie, dict):
        return out
    for part, child in trie.items():
        path = (*prefix, part)
        if isinstance(child, dict) and child:
            out |= from_fields_v1(child, path)
        else:
            out.add(path)
    return out


def path_text(path: Path) -> str:
    """``.spec.containers[name="main"].image`` as in kube-apiserver's conflict messages."""
    text = ""
    for part in path:
        if part == ELEMENT:
            continue
        if part.startswith("f:"):
            text += "." + part[2:]
        else:
            ((key, value),) = json.loads(part[2:]).items()
            text += f"[{key}={json.dumps(value)}]"
    return text


class Managers:
    """The managedFields entries of one object, as (manager, operation) -> (apiVersion, paths)."""

    def __init__(self, obj: Unstructured | None) -> None:
        self.entries: dict[tuple[str, str], tuple[str, set[Path]]] = {}
        self.original: dict[tuple[str, str], dict[str, Any]] = {}  # entries as read: unchanged ones keep their time
        for entry in ((obj or {}).get("metadata") or {}).get("managedFields") or []:
            if isinstance(entry, dict) and entry.get("manager"):
                key = (str(entry["manager"]), str(entry.get("operation", "Update")))
                self.entries[key] = (str(entry.get("apiVersion", "")), from_fields_v1(entry.get("fieldsV1")))
                self.original[key] = entry

    def own(self, manager: str, operation: str, api_version: str, paths: set[Path]) -> None:
        self.entries[(manager, operation)] = (api_version, set(paths))

    def give_up(self, paths: set[Path], keep: tuple[str, str]) -> None:
        """Every other entry stops owning ``paths``."""
        for key, (api_version, owned) in list(self.entries.items()):
            if key != keep:
                self.entries[key] = (api_version, owned - paths)

    def write(self, obj: Unstructured) -> None:
        entries = []
        for (manager, operation), (api_version, paths) in self.entries.items():
            if not paths:
                continue
            before = self.original.get((manager, operation))
            if (
                before is not None
                and before.get("apiVersion") == api_version
                and from_fields_v1(before.get("fieldsV1")) == paths
            ):
                entries.append(before)
                continue
            entries.append(
                {
                    "manager": manager,
                    "operation": operation,
                    "apiVersion": api_version,
                    "time": _now(),
                    "fieldsType": "FieldsV1",
                    "fieldsV1": to_fields_v1(paths),
                }
            )
        meta = obj.setdefault("metadata", {})
        if entries:
            meta["managedFields"] = entries
        else:
            meta.pop("managedFields", None)


def manager_of(query_manager: str | None, user_agent: str) -> str:
    """The request's field manager: ``fieldManager``, else the user agent's program name (as upstream)."""
    if query_manager:
        return query_manager
    return (user_agent.split("/", 1)[0] or "unknown")[:128]


def record_update(old: Unstructured | None, new: Unstructured, manager: str, api_version: str) -> None:
    """A create (``old`` None) or update by ``manager``: it owns what it set or changed."""
    managers = Managers(old if old is not None else new)
    if old is None:
        managers.entries.clear()
    changed = {p for p in field_set(new) if old is None or value_at(old, p) != value_at(new, p)}
    if changed:
        key = (manager, "Update")
        previous = managers.entries.get(key, (api_version, set()))[1]
        managers.give_up(changed, key)
        managers.own(manager, "Update", api_version, previous | changed)
    managers.write(new)
