"""A list read a page at a time, as kubectl reads one (``limit`` + ``continue``): a test's or a
benchmark's own count of thousands of objects must not itself be the heavy request it measures."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx


def listed(http: httpx.Client, path: str, limit: int = 500) -> Iterator[dict[str, Any]]:
    """Every object at ``path`` (a collection URL of the API server), ``limit`` a page."""
    token = ""
    while True:
        page = http.get(path, params={"limit": limit, **({"continue": token} if token else {})}).json()
        yield from page["items"]
        token = page["metadata"].get("continue") or ""
        if not token:
            return


def count(http: httpx.Client, path: str) -> int:
    return sum(1 for _ in listed(http, path))
