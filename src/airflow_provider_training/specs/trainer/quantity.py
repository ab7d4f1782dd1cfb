"""Kubernetes resource quantities, as far as the trainer's rules need them.

``Quantity.Value()`` (the integer the plugins use for CPU and GPU counts) rounds *up*; JSON numbers
that the Kubeflow SDK sends (``1.0``) are written back in canonical form (``"1"``, ``"500m"``).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_SUFFIXES = {
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
}  # fmt: skip
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|)$")


def parse(value: int | float | str) -> Decimal | None:
    """The quantity's value, or None if it is not a quantity."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value)) if math.isfinite(value) else None
    match = _QUANTITY.match(value.strip())
    if not match:
        return None
    number, exponent, suffix = match.groups()
    try:
        result = Decimal(number) * _SUFFIXES[suffix]
        if exponent:
            result *= Decimal(10) ** int(exponent)
    except InvalidOperation:
        return None
    return result


def value(quantity: int | float | str) -> int:
    """``Quantity.Value()``: the integer value, rounded up; 0 for something that is not a quantity."""
    parsed = parse(quantity)
    return math.ceil(parsed) if parsed is not None else 0


def canonical(quantity: int | float | str) -> int | float | str:
    """JSON numbers become the API server's canonical string; strings stay as written."""
    if isinstance(quantity, str | bool):
        return quantity
    parsed = parse(quantity)
    if parsed is None:
        return quantity
    if parsed == parsed.to_integral_value():
        return str(int(parsed))
    milli = parsed * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(parsed.normalize(), "f")
