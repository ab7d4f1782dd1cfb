"""Kubernetes resource quantities in the canonical form kube-apiserver stores and returns.

A quantity is written in one of three formats, chosen by its suffix: binary SI (``Ki`` … ``Ei``),
decimal SI (none, ``n``, ``u``, ``m``, ``k``, ``M`` … ``E``) or a decimal exponent (``e3``). The
server keeps the format and rewrites the number in the shortest exact form, as
``k8s.io/apimachinery/pkg/api/resource.Quantity.String()`` does: ``1`` → ``"1"``, ``0.5`` →
``"500m"``, ``1000`` → ``"1k"``, ``1024Mi`` → ``"1Gi"``, ``1.5Gi`` → ``"1536Mi"``, ``1.5Ki`` →
``"1536"`` (binary values below 1024 or with a fraction fall back to decimal SI). Precision finer
than nano is rounded up, as upstream does.

Hand-written: the ``kubernetes`` client parses quantities (``kubernetes.utils.parse_quantity``) but
has nothing that writes the canonical string, and this module must stay importable without it.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

# The message kube-apiserver answers with for a malformed quantity (inside a 400 decode error).
QUANTITY_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

_FORM = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_NANO = Decimal("1e-9")


class QuantityError(ValueError):
    def __init__(self, value: Any) -> None:
        super().__init__(f"{value!r}: {QUANTITY_ERROR}")
        self.value = value


def parse(value: Any) -> tuple[Decimal, str]:
    """The value of a quantity and its format: ``"binary"``, ``"decimal"`` or ``"exponent"``."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(value)
    text = repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, float):  # a YAML/JSON number such as 0.5 or 1e3: its shortest decimal text
        text = format(Decimal(text), "f") if "e" in text.lower() else text
    match = _FORM.match(text.strip())
    if match is None:
        raise QuantityError(value)
    number, suffix = match.group(1), match.group(2) or ""
    try:
        amount = Decimal(number)
    except InvalidOperation:
        raise QuantityError(value) from None
    if suffix in _BINARY:
        amount *= Decimal(1024) ** _BINARY[suffix]
        form = "binary"
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:
        amount = amount.scaleb(int(suffix[1:]))
        form = "exponent"
    else:
        amount = amount.scaleb(_DECIMAL[suffix])
        form = "decimal"
    exponent = amount.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -9:
        amount = amount.quantize(_NANO, rounding=ROUND_CEILING)
    return amount, form


def canonical(value: Any) -> str:
    """The string kube-apiserver returns for ``value``; raises ``QuantityError`` if it is none."""
    amount, form = parse(value)
    if amount == 0:
        return "0"
    if form == "binary" and (abs(amount) < 1024 or amount != amount.to_integral_value()):
        form = "decimal"
    if form == "binary":
        mantissa, power = int(amount), 0
        while mantissa % 1024 == 0 and power < 6:
            mantissa //= 1024
            power += 1
        return f"{mantissa}{['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][power]}"
    # decimal: mantissa * 10^exponent with an integer mantissa and the exponent a multiple of 3, the
    # largest such exponent (trailing zeros folded into the suffix)
    sign, digits, exponent = amount.normalize().as_tuple()
    mantissa = int("".join(map(str, digits)))
    assert isinstance(exponent, int)
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if form == "decimal" and exponent > 18:
        mantissa *= 10 ** (exponent - 18)
        exponent = 18
    text = f"{'-' if sign else ''}{mantissa}"
    if form == "exponent":
        return text if exponent == 0 else f"{text}e{exponent}"
    return text + _DECIMAL_SUFFIX[exponent]


def canonical_map(values: Any, path: str, problems: list[tuple[str, Any]] | None = None) -> Any:
    """A ``ResourceList`` (name → quantity) with each value canonical. Values that are not quantities
    are kept and reported in ``problems`` as (field path, value) when a list is given."""
    if not isinstance(values, dict):
        return values
    out = {}
    for name, value in values.items():
        try:
            out[name] = canonical(value)
        except QuantityError:
            out[name] = value
            if problems is not None:
                problems.append((f"{path}.{name}", value))
    return out
