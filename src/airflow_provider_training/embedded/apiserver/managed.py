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

import heapq
import json
from collections.abc import Iterable
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


_MISSING: Any = object()


def changed_paths(old: Unstructured | None, new: Unstructured) -> set[Path]:
    """The paths of :func:`field_set` of ``new`` whose value (or presence) differs in ``old`` (all of
    them for a create): one walk of both objects, a subtree equal in both skipped at C speed. (Each
    path looked up in both objects cost a list scan per keyed element: 150,000 keys took seconds.)"""
    if old is None:
        return field_set(new)
    out: set[Path] = set()
    for key, value in new.items():
        if key in ("apiVersion", "kind", "status"):
            continue
        if key == "metadata" and isinstance(value, dict):
            old_meta = old.get("metadata", _MISSING)
            for mkey, mvalue in value.items():
                if mkey not in _IGNORED_META:
                    before = old_meta.get(mkey, _MISSING) if isinstance(old_meta, dict) else _MISSING
                    _diff(before, mvalue, ("f:metadata", f"f:{mkey}"), mkey, out)
            continue
        _diff(old.get(key, _MISSING), value, (f"f:{key}",), key, out)
    return out


def _diff(old: Any, value: Any, path: Path, field: str, out: set[Path]) -> None:
    """``_walk`` of ``value`` keeping the leaves whose value in ``old`` (at the same path) differs."""
    if old is not _MISSING and old == value:
        return  # (every leaf below is equal: ``value_at`` would find the same values)
    if isinstance(value, dict) and value:
        if not isinstance(old, dict):
            _walk(value, path, field, out)
            return
        for key, child in value.items():
            _diff(old.get(key, _MISSING), child, (*path, f"f:{key}"), key, out)
        return
    if isinstance(value, list):
        key = merge_key(field, value)
        if key is not None:
            before = _elements(old, key)
            for item in value:
                element = (*path, element_name(key, item[key]))
                old_item = before(item[key])
                if old_item is _MISSING:
                    out.add((*element, ELEMENT))
                for child_key, child in item.items():
                    previous = old_item.get(child_key, _MISSING) if old_item is not _MISSING else _MISSING
                    _diff(previous, child, (*element, f"f:{child_key}"), child_key, out)
            return
    if old is _MISSING or old != value:
        out.add(path)


def _elements(old: Any, key: str) -> Any:
    """A lookup of ``old``'s list elements by their ``key`` value (the first with that value, as
    :func:`value_at` finds it), by hash where the values allow."""
    items = [i for i in old if isinstance(i, dict)] if isinstance(old, list) else []
    index: dict[Any, Any] = {}
    unhashable: list[dict[str, Any]] = []
    for item in items:
        wanted = item.get(key)
        try:
            index.setdefault(wanted, item)
        except TypeError:  # a list or map as a key value
            unhashable.append(item)

    def lookup(wanted: Any) -> Any:
        try:
            found = index.get(wanted, _MISSING)
        except TypeError:
            return next((i for i in items if i.get(key) == wanted), _MISSING)
        if found is _MISSING and unhashable:
            return next((i for i in unhashable if i.get(key) == wanted), _MISSING)
        return found

    return lookup


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
    """The FieldsV1 trie of ``paths``, each level in sorted order (as kube-apiserver writes it).
    Built unsorted, then each node sorted on its own: sorting every path as a tuple took most of
    a 150,000-key ConfigMap's write."""
    trie: dict[str, Any] = {}
    for path in paths:
        node = trie
        for part in path:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            node = child
    return _sorted(trie)


def _sorted(node: Unstructured) -> dict[str, Any]:
    if len(node) > 1:
        node = {part: node[part] for part in sorted_keys(node)}
    for part, child in node.items():
        if child:
            node[part] = _sorted(child)
    return node


_RUN = 4096


def sorted_keys(keys: Iterable[str]) -> list[str]:
    """``sorted(keys)``, in runs of a few thousand merged in Python: one ``sorted`` of 150,000 keys
    holds the interpreter (every other thread, the event loop's included) for a quarter second on
    a busy machine; the merge lets them in between."""
    items = list(keys)
    if len(items) <= _RUN:
        return sorted(items)
    runs = [sorted(items[i : i + _RUN]) for i in range(0, len(items), _RUN)]
    return list(heapq.merge(*runs))


def from_fields_v1(trie: Any, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    if not isinstance(trie, dict):
        return out
    stack: list[tuple[Path, dict[str, Any]]] = [(prefix, trie)]
    while stack:
        base, node = stack.pop()
        for part, child in node.items():
            path = (*base, part)
            if isinstance(child, dict) and child:
                stack.append((path, child))
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
        self._read: dict[tuple[str, str], set[Path]] = {}  # their paths, so ``write`` need not parse them again
        for entry in ((obj or {}).get("metadata") or {}).get("managedFields") or []:
            if isinstance(entry, dict) and entry.get("manager"):
                key = (str(entry["manager"]), str(entry.get("operation", "Update")))
                paths = from_fields_v1(entry.get("fieldsV1"))
                self.entries[key] = (str(entry.get("apiVersion", "")), paths)
                self.original[key] = entry
                self._read[key] = set(paths)

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
                and self._read[(manager, operation)] == paths
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
    changed = changed_paths(old, new)
    if changed:
        key = (manager, "Update")
        previous = managers.entries.get(key, (api_version, set()))[1]
        managers.give_up(changed, key)
        managers.own(manager, "Update", api_version, previous | changed)
    managers.write(new)
