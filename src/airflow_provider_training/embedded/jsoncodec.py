"""JSON for the control plane's hot paths: the store's rows and the API server's responses.

msgspec's encoder writes a 4 MB object (a ConfigMap of 150,000 keys with its managedFields) in
about 8 ms; the standard library's took 300-400 ms, most of it in garbage collections set off by
the (key, value) tuples it builds for every dict, and held the event loop all that time. What
msgspec refuses (a lone UTF-16 surrogate in a string, a value JSON cannot hold) goes through the
standard library, as before. Decoding keeps the standard library's leniency as the fallback too.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import msgspec

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()
_MEMBERS = msgspec.json.Decoder(dict[str, msgspec.Raw] | list[msgspec.Raw])
# Each decode holds the interpreter, every thread's, until it returns. So a JSON text larger than
# this is decoded in pieces: a wide object or array of scalars (a ConfigMap's data, its
# managedFields' ``f:data``) a run of members at a time, any other container a member at a time.
SPLIT_ABOVE = 256 * 1024
_SPLIT_DEPTH = 5  # (object, metadata, managedFields, an entry, fieldsV1)
_WINDOW = 64 * 1024  # bytes of a wide container decoded in one call (a few milliseconds)

# A run of scalar members (a string, number, literal or empty container, then a comma), found by a
# regular expression that never looks past ``_WINDOW`` bytes: msgspec checks each run as it decodes
# it, so these only need to find where members end, never to validate them.
_WS = rb"[ \t\r\n]*"
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_SCALAR = rb"(?:" + _STRING + rb"|[-+.0-9eE]+|true|false|null|\{" + _WS + rb"\}|\[" + _WS + rb"\])"
_MEMBER = _WS + _STRING + _WS + rb":" + _WS + _SCALAR + _WS
_ELEMENT = _WS + _SCALAR + _WS
_RUNS = {
    ord("{"): (re.compile(rb"(?:" + _MEMBER + rb",)+"), re.compile(_MEMBER + rb"\}" + _WS), b"{", b"}"),
    ord("["): (re.compile(rb"(?:" + _ELEMENT + rb",)+"), re.compile(_ELEMENT + rb"\]" + _WS), b"[", b"]"),
}
_FIRST = re.compile(_WS)


def encode(obj: Any) -> bytes:
    """Compact UTF-8 JSON (``separators=(",", ":")``, not ASCII-escaped)."""
    try:
        if _has_wide(obj):
            return _encode_pieces(obj, _SPLIT_DEPTH)
        return _ENCODER.encode(obj)
    except (TypeError, ValueError, OverflowError):  # (UnicodeEncodeError is a ValueError)
        # "replace": a Status may quote input, and input is not always valid Unicode
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "replace")


# A container of more members than this is encoded in pieces of as many (building each piece's dict
# costs more than encoding it: a 150,000-key map takes ~4 times the CPU of one call, but no call
# takes more than a millisecond or two; so only a container this wide is worth it).
_WIDE = 16384


def _has_wide(obj: Any) -> bool:
    """Whether ``obj`` or a container in its first two levels has more than ``_WIDE`` members (a
    ConfigMap's ``data``, an object's annotations): a large object, encoded in pieces. (Cheap, as
    it runs for every object written: a pod's first two levels are a few dozen values.)"""
    if not isinstance(obj, dict):
        return isinstance(obj, list) and len(obj) > _WIDE
    if len(obj) > _WIDE:
        return True
    for value in obj.values():
        if isinstance(value, (dict, list)):
            if len(value) > _WIDE:
                return True
            if len(value) <= 64:
                for member in value.values() if isinstance(value, dict) else value:
                    if isinstance(member, (dict, list)) and len(member) > _WIDE:
                        return True
    return False


def _encode_pieces(obj: Any, depth: int) -> bytes:
    """``_ENCODER.encode(obj)``, a wide container ``_WIDE`` members a call and the containers on
    the way to one a member a call (each call holds the interpreter until it returns)."""
    if isinstance(obj, dict) and obj and (depth > 0 or len(obj) > _WIDE):
        if len(obj) > _WIDE:
            items = iter(obj.items())
            parts = [_ENCODER.encode(dict(itertools.islice(items, _WIDE)))[1:-1] for _ in range(0, len(obj), _WIDE)]
        else:
            parts = [_key(key) + b":" + _encode_pieces(value, depth - 1) for key, value in obj.items()]
        return b"{" + b",".join(parts) + b"}"
    if isinstance(obj, list) and obj and (depth > 0 or len(obj) > _WIDE):
        if len(obj) > _WIDE:
            parts = [_ENCODER.encode(obj[i : i + _WIDE])[1:-1] for i in range(0, len(obj), _WIDE)]
        else:
            parts = [_encode_pieces(item, depth - 1) for item in obj]
        return b"[" + b",".join(parts) + b"]"
    return _ENCODER.encode(obj)


def _key(key: Any) -> bytes:
    if not isinstance(key, str):
        raise TypeError("a key that is not a string")  # (encoded as a whole by the standard library)
    return _ENCODER.encode(key)


def encode_text(obj: Any) -> str:
    return encode(obj).decode("utf-8")


def decode(raw: bytes | str) -> Any:
    """JSON this control plane wrote (a stored row): msgspec, or the standard library for what it
    refuses (escaped lone surrogates in rows written by older versions)."""
    try:
        return _decode(raw, _SPLIT_DEPTH)
    except msgspec.DecodeError:
        return json.loads(raw)


def _decode(raw: Any, depth: int) -> Any:
    if len(raw) <= SPLIT_ABOVE:
        return _DECODER.decode(raw)
    text = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    found = _decode_runs(text, depth)
    if found is not None:
        return found
    if depth == 0:
        return _DECODER.decode(text)
    members = _MEMBERS.decode(text)
    if isinstance(members, list):
        return [_decode(member, depth - 1) for member in members]
    return {key: _decode(member, depth - 1) for key, member in members.items()}


def _decode_runs(text: bytes, depth: int) -> Any:
    """A container whose first members are scalars, decoded ``_WINDOW`` bytes of them at a time,
    the rest (from a member that is not a scalar on) as a container of its own; None when its first
    member is not a scalar, or the text is not well formed (the caller's decode says what is wrong)."""
    at = _FIRST.match(text).end()  # type: ignore[union-attr]  # (matches the empty string)
    if at >= len(text) or text[at] not in _RUNS:
        return None
    runs, last, opener, closer = _RUNS[text[at]]
    pos = at + 1
    pieces = []
    while True:
        run = runs.match(text, pos, min(len(text), pos + _WINDOW))
        if run is None:
            break
        pieces.append(_DECODER.decode(opener + text[pos : run.end() - 1] + closer))
        pos = run.end()
    if not pieces:
        return None
    if len(text) - pos <= _WINDOW and last.fullmatch(text, pos):
        pieces.append(_DECODER.decode(opener + text[pos:]))
    elif text[_FIRST.match(text, pos).end() :][:1] in (b"", closer):  # type: ignore[union-attr]
        return None  # a trailing comma: not JSON
    else:  # a member that is not a scalar, or longer than a window: what is left, on its own
        pieces.append(_decode(opener + text[pos:], depth))
    if opener == b"[":
        return [item for piece in pieces for item in piece]
    merged: dict[str, Any] = {}
    for piece in pieces:
        merged.update(piece)
    return merged


def decode_strict(raw: bytes | str) -> Any:
    """msgspec alone (``ValueError`` for what it refuses), for input whose errors the caller words itself."""
    try:
        return _decode(raw, _SPLIT_DEPTH)
    except msgspec.DecodeError as exc:
        raise ValueError(str(exc)) from None


def copy(obj: Any) -> Any:
    """A deep copy of a JSON value, through its encoding (what the store hands out is never shared)."""
    return decode(encode(obj))
