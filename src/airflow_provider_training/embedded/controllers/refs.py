"""Reading ownerReferences defensively: admission keeps malformed ones out, but objects written
around the API (an older daemon's store) must not stop a controller's watch."""

from __future__ import annotations

from typing import Any


def owner_references(obj: Any) -> list[dict[str, Any]]:
    """The object's ownerReferences that are objects; anything else is ignored."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    return [r for r in refs if isinstance(r, dict)] if isinstance(refs, list) else []
