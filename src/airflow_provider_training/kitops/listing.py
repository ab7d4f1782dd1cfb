"""``kit list`` as kit 1.17 prints it: rows of ``{repo, digest, tags, modelName, size, author}``.

Row rules (kit ``pkg/kit/list.go``, ``pkg/cmd/list``): one row per manifest of each local
repository, sorted by repository then digest; the repository shown without the default registry
(``localhost/``) and ``<none>`` for untagged kits; ``tags`` sorted, ``null`` when there are none;
``modelName`` the Kitfile's ``package.name`` and ``author`` its first author, ``<none>`` when absent;
``size`` the sum of the layers' sizes (not config or manifest) — an integer number of bytes in JSON
(kit 1.17), humanised with kit's ``FormatBytes`` in the table.

JSON is ``json.MarshalIndent(rows, "", "  ")`` (Go's escaping: ``<none>`` is ``"\\u003cnone\\u003e"``);
the table is Go's ``tabwriter`` with padding 3.
"""

from __future__ import annotations

import math
from typing import Any

from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.jsontext import go_indent
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.modelpack import read_kitfile
from airflow_provider_training.specs.gojson import go_marshal

NONE = "<none>"
FIELDS = ("repo", "digest", "tags", "modelName", "size", "author")
_TABLE_HEADER = ("REPOSITORY", "TAG", "MAINTAINER", "NAME", "SIZE", "DIGEST")


def display_repository(repo_key: str) -> str:
    """kit's ``FormatRepositoryForDisplay``: drop the default registry, the default repository
    ``_`` of untagged kits, and a leading ``@``."""
    return repo_key.removeprefix("localhost/").removeprefix("_").removeprefix("@")


def format_bytes(n: int) -> str:
    """kit's ``output.FormatBytes``: ``512 B``, ``1.5 KiB`` (rounded down to a tenth)."""
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for suffix in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or suffix == "TiB":
            return f"{math.floor(size * 10) / 10:.1f} {suffix}"
        size /= 1024
    raise AssertionError("unreachable")


def rows(store: LocalStore) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for kit in store.list():
        manifest = store.read_manifest(kit.descriptor)
        if not mediatypes.is_modelkit_manifest(manifest):
            continue
        kitfile = read_kitfile(manifest, store.read_blob(manifest["config"]["digest"]), kit.repo_key)
        authors = kitfile.package.authors or []
        out.append(
            {
                "repo": display_repository(kit.repo_key) or NONE,
                "digest": kit.descriptor.digest,
                "tags": sorted(kit.tags) or None,
                "modelName": kitfile.package.name or NONE,
                "size": sum(int(layer["size"]) for layer in manifest.get("layers") or []),
                "author": (authors[0] or "") if authors else NONE,
            }
        )
    out.sort(key=lambda row: (row["repo"], row["digest"]))
    return out


def to_json(listed: list[dict[str, Any]]) -> str:
    return go_indent(go_marshal([{key: row[key] for key in FIELDS} for row in listed]))


def to_table(listed: list[dict[str, Any]]) -> str:
    lines = [_TABLE_HEADER]
    for row in listed:
        for tag in row["tags"] or [NONE]:
            cells = (row["repo"], tag, row["author"], row["modelName"], format_bytes(row["size"]), row["digest"])
            lines.append(cells)
    widths = [max(len(line[i]) for line in lines) + 3 for i in range(len(_TABLE_HEADER) - 1)]
    return "\n".join("".join(c.ljust(w) for c, w in zip(line, widths, strict=False)) + line[-1] for line in lines)
