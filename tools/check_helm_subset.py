"""Compare the hand-written chart schema subset with the Airflow Helm chart's own ``values.schema.json``.

Run from the repository root: ``python tools/check_helm_subset.py CHART_DIR`` where CHART_DIR is the
chart's folder (``chart/`` of apache/airflow at the commit the subset names, or ``helm pull
apache-airflow/airflow --version 1.19.0 --untar``). Every node the subset checks must say what the
chart says (type, enum, pattern, required, ...), and every object the chart closes must list the same
property names. Prints each difference and exits 1 if there is one; the subset is in
``tests/data/airflow-helm-chart-1.19.0/`` (see tests/data/README.md).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SUBSET = Path(__file__).resolve().parent.parent / "tests/data/airflow-helm-chart-1.19.0/values-subset.schema.json"
# Keywords that constrain a value; "properties", "items", "oneOf" and "additionalProperties" are walked.
COMPARED = ("type", "enum", "pattern", "required", "uniqueItems", "const", "format", "minimum", "maximum")
CONSTRAINING = {*COMPARED, "anyOf", "allOf", "not", "minLength", "maxLength", "minItems", "maxItems"}
CONSTRAINING |= {"patternProperties", "propertyNames", "dependencies", "if"}


def resolve(root: dict[str, Any], node: Any) -> Any:
    # Both schemas only use local references (#/definitions/NAME); the chart's sometimes carry
    # sibling keywords next to $ref, which Helm's validator and jsonschema both apply.
    while isinstance(node, dict) and "$ref" in node:
        target = root
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def differences(roots: tuple[dict[str, Any], dict[str, Any]], ours: Any, chart: Any, path: str = "") -> Iterator[str]:
    """What differs between the subset's node ``ours`` and the chart's node ``chart`` at ``path``."""
    mine, theirs = resolve(roots[0], ours), resolve(roots[1], chart)
    where = path or "<top level>"
    for key in COMPARED:
        if mine.get(key) != theirs.get(key):
            yield f"{where}: {key} is {mine.get(key)!r} here, {theirs.get(key)!r} in the chart"
    for key in sorted(CONSTRAINING - set(COMPARED)):
        if key in theirs and key not in mine:
            yield f"{where}: the chart also constrains it with {key!r}"
    closed = theirs.get("additionalProperties") is False
    if (mine.get("additionalProperties") is False) != closed:
        yield f"{where}: additionalProperties false here and in the chart must agree"
    elif closed and set(mine.get("properties", {})) != set(theirs.get("properties", {})):
        missing = sorted(set(theirs["properties"]) - set(mine.get("properties", {})))
        extra = sorted(set(mine.get("properties", {})) - set(theirs["properties"]))
        yield f"{where}: property names differ: missing here {missing}, not in the chart {extra}"
    for name, sub in mine.get("properties", {}).items():
        if sub is True:
            continue  # allowed, not checked here
        if name not in theirs.get("properties", {}):
            yield f"{path}.{name}".lstrip(".") + ": not in the chart"
            continue
        yield from differences(roots, sub, theirs["properties"][name], f"{path}.{name}".lstrip("."))
    for key in ("items", "additionalProperties"):
        if isinstance(mine.get(key), dict):
            yield from differences(roots, mine[key], theirs.get(key) or {}, f"{where}[{key}]")
    if "oneOf" in mine or "oneOf" in theirs:
        if len(mine.get("oneOf", [])) != len(theirs.get("oneOf", [])):
            yield f"{where}: oneOf has {len(mine.get('oneOf', []))} branches here, {len(theirs.get('oneOf', []))} there"
        for i, (a, b) in enumerate(zip(mine.get("oneOf", []), theirs.get("oneOf", []), strict=False)):
            yield from differences(roots, a, b, f"{where}[oneOf {i}]")


def main(chart_dir: str) -> int:
    subset, chart = json.loads(SUBSET.read_text()), json.loads((Path(chart_dir) / "values.schema.json").read_text())
    found = list(differences((subset, chart), subset, chart))
    print("\n".join(found) or f"{SUBSET.name} agrees with {chart_dir}/values.schema.json")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
