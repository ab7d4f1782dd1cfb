"""Kubernetes resource quantities: their value, and the canonical string kube-apiserver stores.

One module for admission, the controllers and the Trainer's builds, so a quantity reads the same
wherever it was written. A quantity has one of three formats, chosen by its suffix: binary SI
(``Ki`` … ``Ei``), decimal SI (none, ``n``, ``u``, ``m``, ``k``, ``M`` … ``E``) or a decimal
exponent (``e3``). The canonical string keeps the format and writes the number in the shortest
exact form, as ``k8s.io/apimachinery/pkg/api/resource.Quantity.String()`` does: ``1`` → ``"1"``,
``0.5`` → ``"500m"``, ``1000`` → ``"1k"``, ``1024Mi`` → ``"1Gi"``, ``1.5Gi`` → ``"1536Mi"``,
``1.5Ki`` → ``"1536"`` (binary values below 1024 or with a fraction fall back to decimal SI).
Precision finer than nano is rounded up in magnitude (``inf.RoundUp``), as upstream does.

Arithmetic is exact at any length (upstream's ``inf.Dec``), and a binary SI value is capped at
2^63-1 as upstream's parser caps it. What is written is the canonical form (``CanonicalizeBytes``),
also where the released ``String()`` differs: its parser keeps some inputs as written (``+1``,
``1.001``; kubernetes#138165, to be canonicalised), drops the magnitude of a decimal SI value above
``E`` (``1000E`` → ``"1"``, kubernetes#141249; here ``"1000E"``), and wraps an exponent beyond int32
(here not a quantity).

Hand-written: the ``kubernetes`` client parses quantities (``kubernetes.utils.parse_quantity``) but
has nothing that writes the canonical string, and ``specs`` must not import it.
"""

from __future__ import annotations

import decimal
import math
import re
from decimal import ROUND_UP, Decimal
from typing import Any

# The message kube-apiserver answers with for a malformed quantity (inside a 400 decode error).
QUANTITY_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

_FORM = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_NANO = Decimal("1e-9")
_MAX_BINARY = Decimal(2**63 - 1)
_INT32 = 2**31
# Exact at any length: upstream computes with arbitrary-precision decimals, Python's default is 28 digits.
_EXACT = decimal.Context(
    prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[decimal.InvalidOperation]
)


class QuantityError(ValueError):
    def __init__(self, value: Any) -> None:
        super().__init__(f"{value!r}: {QUANTITY_ERROR}")
        self.value = value


def parse(value: Any) -> tuple[Decimal, str]:
    """The value of a quantity and its format: ``"binary"``, ``"decimal"`` or ``"exponent"``."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(value)
    if isinstance(value, float):  # a YAML/JSON number such as 0.5 or 1e3: its shortest decimal text
        text = repr(value)
        text = format(Decimal(text), "f") if "e" in text.lower() else text
    else:
        text = value if isinstance(value, str) else _int_text(value)
    match = _FORM.match(text.strip())
    if match is None:
        raise QuantityError(value)
    number, suffix = match.group(1), match.group(2) or ""
    with decimal.localcontext(_EXACT):
        try:
            return _scaled(Decimal(number), suffix, value)
        except ArithmeticError:  # a decimal exponent beyond what any arithmetic holds
            raise QuantityError(value) from None


def _int_text(value: int) -> str:
    try:
        return str(value)
    except ValueError:  # more digits than int → str allows (4300)
        return format(Decimal(value), "f")


def _scaled(number: Decimal, suffix: str, value: Any) -> tuple[Decimal, str]:
    if suffix in _BINARY:
        amount = number * Decimal(1024) ** _BINARY[suffix]
        if abs(amount) > _MAX_BINARY:
            amount = _MAX_BINARY.copy_sign(amount)
        form = "binary"
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:
        # upstream reads the exponent as int64 and keeps it in an int32
        if len(suffix) > 12 or not -_INT32 <= int(suffix[1:]) < _INT32:
            raise QuantityError(value)
        amount = number.scaleb(int(suffix[1:]))
        form = "exponent"
    else:
        amount = number.scaleb(_DECIMAL[suffix])
        form = "decimal"
    exponent = amount.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -9:
        amount = amount.quantize(_NANO, rounding=ROUND_UP)
    return amount, form


def decimal_value(value: Any) -> Decimal | None:
    """The quantity's value, or None if ``value`` is not a quantity (for checks that report it elsewhere)."""
    try:
        return parse(value)[0]
    except QuantityError:
        return None


def ceil_value(quantity: Any) -> int:
    """``Quantity.Value()``: the integer value, rounded up; 0 for something that is not a quantity."""
    parsed = decimal_value(quantity)
    return math.ceil(parsed) if parsed is not None else 0


def canonical(value: Any) -> str:
    """The string kube-apiserver returns for ``value``; raises ``QuantityError`` if it is none."""
    amount, form = parse(value)
    if amount == 0:
        return "0"
    if form == "binary" and (abs(amount) < 1024 or amount != amount.to_integral_value()):
        form = "decimal"
    if form == "binary":
        mantissa, power = int(amount), 0  # at most 2^63-1: int and str are cheap
        while mantissa % 1024 == 0 and power < 6:
            mantissa //= 1024
            power += 1
        return f"{mantissa}{['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][power]}"
    # decimal: mantissa * 10^exponent with an integer mantissa and the exponent a multiple of 3, the
    # largest such exponent (trailing zeros folded into the suffix); digits as text, of any length
    with decimal.localcontext(_EXACT):
        sign, digits, exponent = amount.normalize().as_tuple()
    assert isinstance(exponent, int)
    zeros = exponent % 3
    exponent -= zeros
    if form == "decimal" and exponent > 18:
        zeros += exponent - 18
        exponent = 18
    text = f"{'-' if sign else ''}{''.join(map(str, digits))}{'0' * zeros}"
    if form == "exponent":
        return text if exponent == 0 else f"{text}e{exponent}"
    return text + _DECIMAL_SUFFIX[exponent]


def canonical_map(values: Any, path: str = "", problems: list[tuple[str, Any]] | None = None) -> Any:
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
