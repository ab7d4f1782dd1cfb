"""``ObjectRef``: which object — kind, namespace, name and (when known) uid — as one value.

The same four fields otherwise travel as loose dicts and tuples (XCom, the task state store, trigger
kwargs, events, errors); this is the one shape, with its dict form (``to_dict`` / ``from_dict``,
keys ``kind``, ``namespace``, ``name``, ``uid``) for JSON and its reading from an API object
(``of``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ObjectRef:
    kind: str
    namespace: str
    name: str
    uid: str | None = None

    @classmethod
    def of(cls, obj: Mapping[str, Any], kind: str | None = None) -> ObjectRef:
        """The reference of an API object (``kind`` where the object does not say it)."""
        meta = obj.get("metadata") or {}
        return cls(
            str(obj.get("kind") or kind or ""),
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            meta.get("uid") or None,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ObjectRef:
        missing = [key for key in ("kind", "namespace", "name") if not data.get(key)]
        if missing:
            raise ValueError(f"an object reference needs {', '.join(missing)} (got {dict(data)!r})")
        return cls(str(data["kind"]), str(data["namespace"]), str(data["name"]), data.get("uid") or None)

    def to_dict(self) -> dict[str, str | None]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "uid": self.uid}

    def involved_object(self, api_version: str = "") -> dict[str, str]:
        """The ``involvedObject`` of an Event about this object."""
        out = {"kind": self.kind, "namespace": self.namespace, "name": self.name}
        if self.uid:
            out["uid"] = self.uid
        if api_version:
            out["apiVersion"] = api_version
        return out

    def same_object(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` is this object (and not another one of the same name, when the uid is known)."""
        other = ObjectRef.of(obj, self.kind)
        return (other.namespace, other.name) == (self.namespace, self.name) and (
            self.uid is None or other.uid == self.uid
        )

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"
