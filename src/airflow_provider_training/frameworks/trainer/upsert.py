"""Upstream's ``pkg/apply`` upserts on plain dicts: replace the matching item in place, else append."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Item = dict[str, Any]


def _upsert(items: list[Item], item: Item, same: Callable[[Item, Item], bool]) -> None:
    for i, existing in enumerate(items):
        if same(existing, item):
            items[i] = item
            return
    items.append(item)


def env(container: Item, *variables: Item) -> None:
    target = container.setdefault("env", [])
    for variable in variables:
        _upsert(target, dict(variable), lambda a, b: a.get("name") == b.get("name"))


def ports(container: Item, *new: Item) -> None:
    # ``byContainerPortOrName``: two ports without names count as the same port (a Go nil == nil quirk).
    target = container.setdefault("ports", [])
    for port in new:
        _upsert(
            target,
            dict(port),
            lambda a, b: a.get("containerPort") == b.get("containerPort") or a.get("name") == b.get("name"),
        )


def volumes(pod: Item, *new: Item) -> None:
    target = pod.setdefault("volumes", [])
    for volume in new:
        _upsert(target, dict(volume), lambda a, b: a.get("name") == b.get("name"))


def volume_mounts(container: Item, *new: Item) -> None:
    target = container.setdefault("volumeMounts", [])
    for mount in new:
        _upsert(target, dict(mount), lambda a, b: a.get("mountPath") == b.get("mountPath"))


def value(name: str, text: str) -> Item:
    return {"name": name, "value": text}


def field_ref(name: str, path: str) -> Item:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
