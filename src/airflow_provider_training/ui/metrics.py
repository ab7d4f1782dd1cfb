"""The metrics convention: training code prints one line per measurement to stdout,

    METRIC {"step": 3, "loss": 0.41, "accuracy": 0.92}

i.e. the word ``METRIC``, a space and a JSON object with a numeric ``step`` (or ``epoch``) and any
number of numeric scalars. Nothing else is needed (no server, no SDK): the cockpit reads the line
back from the replica's log. Lines that do not parse are ignored, never fatal.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

# After a launcher's prefix ("[rank0]: ", "[default0]:") or at the start of the line.
METRIC_LINE = re.compile(r"(?:^|[\s\]:])METRIC\s+(\{.*\})\s*$")
MAX_POINTS = 10_000


def parse_line(line: str) -> dict[str, float] | None:
    """The scalars of one ``METRIC`` line (with ``step``), or ``None`` when it is not one."""
    match = METRIC_LINE.search(line)
    if match is None:
        return None
    try:
        data: Any = json.loads(match.group(1))
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    point: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        point[str(key)[:64]] = float(value)
    if "step" not in point and "epoch" in point:
        point["step"] = point["epoch"]
    return point if "step" in point else None


def parse(lines: Iterable[str]) -> list[dict[str, float]]:
    """Every metric point in ``lines``, in order (at most ``MAX_POINTS``)."""
    points: list[dict[str, float]] = []
    for line in lines:
        point = parse_line(line)
        if point is not None:
            points.append(point)
            if len(points) >= MAX_POINTS:
                break
    return points


def names(points: Iterable[dict[str, float]]) -> list[str]:
    """The scalars reported, ``step``/``epoch`` left out, in first-seen order."""
    seen: dict[str, None] = {}
    for point in points:
        for key in point:
            if key not in ("step", "epoch"):
                seen.setdefault(key, None)
    return list(seen)
