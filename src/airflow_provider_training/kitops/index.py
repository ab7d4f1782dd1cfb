"""ModelKit indexes as kit 1.17 writes and reads them (``kit index``, ``kit pull/unpack -l``).

An OCI image index (``mediaType`` ``application/vnd.oci.image.index.v1+json``, ``artifactType``
``application/vnd.kitops.modelkit.index.v1+json``, no ``platform``) whose entries are ModelKit
manifest descriptors carrying kit's ``modelMetadata`` (the labels: any JSON value, kept verbatim)
and annotations (``ml.kitops.modelkit.original-tag``, ``ml.kitops.modelkit.size``, the user's).
Serialized as Go marshals kit's ``ModelKitIndex`` struct (``pkg/lib/index``): compact, field order
``schemaVersion, mediaType, artifactType, manifests, subject, annotations``; an entry is the OCI
descriptor's fields then ``modelMetadata``; maps sorted; ``"manifests":[]`` when empty.

A label selects one entry (``SelectEntry``); an entry is a ModelKit, never another index, so
nested indexes (and loops of them) are refused rather than followed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.jsontext import go_compact
from airflow_provider_training.specs.gojson import go_marshal, go_string

MAX_INDEX_BYTES = 4 << 20  # what a registry must accept for a manifest (OCI distribution spec)
MAX_LISTED = 20  # entries named in an error message
_KEY_MAX = 512
# Kubernetes-style qualified names without their length limits (kit's labelKeyPattern)
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
RESERVED_ANNOTATION_PREFIX = "ml.kitops."
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_DESCRIPTOR_ORDER = ("mediaType", "digest", "size", "urls", "annotations", "data", "platform", "artifactType")
_PLATFORM_ORDER = ("architecture", "os", "os.version", "os.features", "variant")


class ModelKitIndexError(ValueError):
    """An index that cannot be read or used; the message names the index and what to do."""


class NotAnIndexError(ModelKitIndexError):
    pass


@dataclass
class Entry:
    """One ModelKit of an index: its manifest descriptor and labels (label values are compact
    JSON text, as Go keeps a ``json.RawMessage``)."""

    digest: str
    size: int
    media_type: str = mediatypes.MANIFEST
    annotations: dict[str, str] = field(default_factory=dict)
    artifact_type: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # urls, data, platform: kept, never written by us

    def label_value(self, key: str) -> str | None:
        """kit's ``FormatLabelValue``: a JSON string unquoted, anything else as its JSON text."""
        raw = self.labels.get(key)
        if raw is None:
            return None
        value = json.loads(raw)
        return value if isinstance(value, str) else raw

    def label_pairs(self) -> list[str]:
        return [f"{key}={self.label_value(key)}" for key in sorted(self.labels)]

    def to_go(self) -> str:
        values: dict[str, Any] = {
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": self.size,
            "annotations": dict(sorted(self.annotations.items())) or None,
            "artifactType": self.artifact_type or None,
            **self.extra,
        }
        parts = []
        for key in _DESCRIPTOR_ORDER:
            value = values.get(key)
            if value is None or value == [] or value == "":
                continue  # omitempty
            if key == "platform" and isinstance(value, dict):
                value = {k: value[k] for k in _PLATFORM_ORDER if value.get(k) not in (None, "", [])}
            parts.append(f"{go_string(key)}:{go_marshal(value)}")
        if self.labels:
            inner = ",".join(f"{go_string(k)}:{self.labels[k]}" for k in sorted(self.labels))
            parts.append('"modelMetadata":{' + inner + "}")
        return "{" + ",".join(parts) + "}"


@dataclass
class ModelKitIndex:
    entries: list[Entry] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    subject: dict[str, Any] | None = None

    def get(self, digest: str) -> Entry | None:
        return next((e for e in self.entries if e.digest == digest), None)

    def add(self, entry: Entry) -> None:
        """kit's ``AddEntry``: replaces an entry with the same digest, else appends."""
        for i, existing in enumerate(self.entries):
            if existing.digest == entry.digest:
                self.entries[i] = entry
                return
        self.entries.append(entry)

    def remove(self, digest: str) -> bool:
        before = len(self.entries)
        self.entries = [e for e in self.entries if e.digest != digest]
        return len(self.entries) != before

    def to_bytes(self) -> bytes:
        parts = [
            '"schemaVersion":2',
            f'"mediaType":{go_string(mediatypes.INDEX)}',
            f'"artifactType":{go_string(mediatypes.INDEX_ARTIFACT_TYPE)}',
            '"manifests":[' + ",".join(e.to_go() for e in self.entries) + "]",
        ]
        if self.subject:
            parts.append(f'"subject":{go_marshal(self.subject)}')
        if self.annotations:
            parts.append(f'"annotations":{go_marshal(dict(sorted(self.annotations.items())))}')
        return ("{" + ",".join(parts) + "}").encode()


def is_index_document(doc: Any) -> bool:
    """True for any OCI image index (a ModelKit index or not)."""
    return isinstance(doc, dict) and (
        doc.get("mediaType") == mediatypes.INDEX or ("manifests" in doc and "layers" not in doc)
    )


def parse(data: bytes, where: str) -> ModelKitIndex:
    """Read a ModelKit index; :class:`NotAnIndexError` when ``data`` is something else (kit's
    ``ErrNotAKitIndex``), :class:`ModelKitIndexError` naming ``where`` when it is malformed."""
    if len(data) > MAX_INDEX_BYTES:
        raise ModelKitIndexError(f"{where} is {len(data)} bytes, more than the {MAX_INDEX_BYTES} a manifest may have")
    try:
        doc = json.loads(data, parse_int=_RawNumber, parse_float=_RawNumber, parse_constant=_no_constant)
    except ValueError as exc:
        raise ModelKitIndexError(f"{where} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ModelKitIndexError(f"{where} is not a JSON object")
    if doc.get("mediaType") != mediatypes.INDEX or doc.get("artifactType") != mediatypes.INDEX_ARTIFACT_TYPE:
        raise NotAnIndexError(
            f"{where} is not a ModelKit index (mediaType {doc.get('mediaType')!r}, artifactType "
            f"{doc.get('artifactType')!r}; kit writes {mediatypes.INDEX} with {mediatypes.INDEX_ARTIFACT_TYPE})"
        )
    manifests = doc.get("manifests")
    if not isinstance(manifests, list):
        raise ModelKitIndexError(f"{where} has no 'manifests' list")
    if b"\\u" in data or b"\\/" in data:
        # an escape Go's Compact keeps but a decode/encode round trip would not: cut the raw text out
        labels_raw = _raw_model_metadata(data.decode("utf-8"), len(manifests))
    else:
        labels_raw = [_labels_of(item) for item in manifests]
    entries = []
    for i, item in enumerate(manifests):
        entries.append(_entry(item, labels_raw[i], f"entry {i} of {where}"))
    annotations = doc.get("annotations") or {}
    if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
        raise ModelKitIndexError(f"{where} has annotations that are not strings")
    subject = _plain(doc["subject"]) if isinstance(doc.get("subject"), dict) else None
    return ModelKitIndex(entries, dict(annotations), subject)


def _entry(item: Any, labels: dict[str, str], where: str) -> Entry:
    if not isinstance(item, dict):
        raise ModelKitIndexError(f"{where} is not a descriptor object")
    digest, size = item.get("digest"), item.get("size")
    size = int(size) if isinstance(size, _RawNumber) and size.isdigit() else size
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise ModelKitIndexError(f"{where} has digest {digest!r}, not sha256:<64 hex>")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ModelKitIndexError(f"{where} ({digest}) has size {size!r}, not a byte count")
    annotations = item.get("annotations") or {}
    if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
        raise ModelKitIndexError(f"{where} ({digest}) has annotations that are not strings")
    extra = {k: _plain(item[k]) for k in ("urls", "data", "platform") if k in item}
    return Entry(
        digest=digest,
        size=size,
        media_type=str(item.get("mediaType", "")),
        annotations=dict(annotations),
        artifact_type=str(item.get("artifactType") or ""),
        labels=labels,
        extra=extra,
    )


class _RawNumber(str):
    """A JSON number kept as written (Go keeps a RawMessage's text)."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _plain(value: Any) -> Any:
    if isinstance(value, _RawNumber):
        return json.loads(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _emit(value: Any) -> str:
    """Compact JSON of a decoded label value, numbers as written, objects in their order."""
    if isinstance(value, _RawNumber):
        return str(value)
    if isinstance(value, str):
        return go_string(value)
    if isinstance(value, list):
        return "[" + ",".join(_emit(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{go_string(k)}:{_emit(v)}" for k, v in value.items()) + "}"
    return "null" if value is None else ("true" if value else "false")


def _labels_of(item: Any) -> dict[str, str]:
    meta = item.get("modelMetadata") if isinstance(item, dict) else None
    return {k: _emit(v) for k, v in meta.items()} if isinstance(meta, dict) else {}


# -- raw label values --------------------------------------------------------------------------
# Go keeps each modelMetadata value as a json.RawMessage and re-marshals it compacted, not decoded
# and re-encoded: "1.50", "1e3" or "\u00e9" survive as written. Python's json decodes them, so the
# raw text of each value is cut out of the document here (the document was validated by json.loads).

_WS = " \t\n\r"
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(r"[^,\]}\s]+")


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def _end_of_value(s: str, i: int) -> int:
    ch = s[i]
    if ch == '"':
        m = _STRING.match(s, i)
        assert m is not None  # the document was validated
        return m.end()
    if ch in "[{":
        close = "]" if ch == "[" else "}"
        i = _skip_ws(s, i + 1)
        if s[i] == close:
            return i + 1
        while True:
            if ch == "{":
                i = _skip_ws(s, _end_of_value(s, i))  # key
                i = _skip_ws(s, i + 1)  # ':'
            i = _skip_ws(s, _end_of_value(s, i))
            if s[i] == close:
                return i + 1
            i = _skip_ws(s, i + 1)  # ','
    m = _SCALAR.match(s, i)
    assert m is not None
    return m.end()


def _members(s: str, i: int) -> Iterable[tuple[str, int, int]]:
    """(key, value start, value end) of the object starting at ``s[i]``."""
    i = _skip_ws(s, i + 1)
    if s[i] == "}":
        return
    while True:
        key_end = _end_of_value(s, i)
        key = json.loads(s[i:key_end])
        start = _skip_ws(s, _skip_ws(s, key_end) + 1)
        end = _end_of_value(s, start)
        yield key, start, end
        i = _skip_ws(s, end)
        if s[i] == "}":
            return
        i = _skip_ws(s, i + 1)


def _raw_model_metadata(text: str, count: int) -> list[dict[str, str]]:
    out: list[dict[str, str]] = [{} for _ in range(count)]
    root = _skip_ws(text, 0)
    for key, start, _ in _members(text, root):
        if key != "manifests":
            continue
        i = _skip_ws(text, start + 1)
        n = 0
        while text[i] != "]":
            end = _end_of_value(text, i)
            labels: dict[str, str] = {}
            for entry_key, vstart, _ in _members(text, i):
                if entry_key == "modelMetadata" and text[vstart] == "{":
                    labels = {k: go_compact(text[s:e]) for k, s, e in _members(text, vstart)}
            out[n] = labels  # a later duplicate key wins, as in Go
            n += 1
            i = _skip_ws(text, end)
            if text[i] == ",":
                i = _skip_ws(text, i + 1)
    return out


# -- labels and selection ----------------------------------------------------------------------


def parse_label_edits(args: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """``key=value`` (a string), ``key:=json`` (any JSON value), ``key-`` (remove), as ``kit index
    add -l`` reads them; returns (values to set as compact JSON text, keys to remove)."""
    to_set: dict[str, str] = {}
    to_remove: list[str] = []
    for key, value, is_json, remove in _key_values(args, "label"):
        if remove:
            to_remove.append(key)
            continue
        if len(key) > _KEY_MAX or not _LABEL_KEY.match(key):
            raise ModelKitIndexError(
                f"invalid label key {key!r}: must be a name of letters, digits, '-', '_', and '.' that starts and "
                "ends with a letter or digit, optionally prefixed by a DNS subdomain and '/' (e.g. example.com/gpu)"
            )
        if not is_json:
            to_set[key] = go_string(value)
            continue
        try:
            json.loads(value)
        except ValueError:
            raise ModelKitIndexError(f"invalid label {key}:={value}: value is not valid JSON") from None
        to_set[key] = go_compact(value)
    return to_set, to_remove


def parse_annotation_edits(args: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    to_set: dict[str, str] = {}
    to_remove: list[str] = []
    for key, value, is_json, remove in _key_values(args, "annotation"):
        if key.startswith(RESERVED_ANNOTATION_PREFIX):
            raise ModelKitIndexError(
                f"invalid annotation {key!r}: the {RESERVED_ANNOTATION_PREFIX} namespace is reserved for "
                "annotations kit records itself"
            )
        if remove:
            to_remove.append(key)
        elif is_json:
            raise ModelKitIndexError(f"invalid annotation {key}:={value}: annotation values are strings; use key=value")
        else:
            to_set[key] = value
    return to_set, to_remove


def _key_values(args: Iterable[str], kind: str) -> Iterable[tuple[str, str, bool, bool]]:
    seen: set[str] = set()
    for arg in args:
        key, eq, value = arg.partition("=")
        if eq and key.endswith(":"):
            item = (key[:-1], value, True, False)
        elif eq:
            item = (key, value, False, False)
        elif arg.endswith("-"):
            item = (arg[:-1], "", False, True)
        else:
            raise ModelKitIndexError(f"invalid {kind} {arg!r}: expected key=value to set, or key- to remove")
        if not item[0]:
            raise ModelKitIndexError(f"invalid {kind} {arg!r}: key cannot be empty")
        if item[0] in seen:
            raise ModelKitIndexError(f"invalid {kind} {arg!r}: each key can be specified only once")
        seen.add(item[0])
        yield item


def parse_selector(args: Iterable[str]) -> dict[str, str]:
    """``-l key=value`` arguments of ``kit pull/unpack`` (kit's ``ParseLabelSelector``)."""
    selector: dict[str, str] = {}
    for arg in args:
        key, eq, value = arg.partition("=")
        if not eq or not key:
            raise ModelKitIndexError(f"invalid label {arg!r}: expected key=value")
        if key in selector:
            raise ModelKitIndexError(
                f"invalid label {arg!r}: {key} is already set to {selector[key]!r}; each label can be specified only once"
            )
        selector[key] = value
    return selector


def entry_reference(entry: Entry, index_repo: str) -> str:
    """``<repository>:<original tag>`` the entry was added under, or '' (kit's ``EntryReference``)."""
    tag = entry.annotations.get(mediatypes.ANNOTATION_ORIGINAL_TAG)
    return f"{index_repo}:{tag}" if tag else ""


def describe(entries: list[Entry], index_repo: str) -> str:
    lines = []
    for entry in entries[:MAX_LISTED]:
        labels = ", ".join(entry.label_pairs()) or "no labels"
        lines.append(f"  {entry_reference(entry, index_repo) or entry.digest}  ({labels})")
    if len(entries) > MAX_LISTED:
        lines.append(f"  … and {len(entries) - MAX_LISTED} more")
    return "\n".join(lines)


def select(index: ModelKitIndex, selector: dict[str, str], index_repo: str) -> Entry:
    """The one entry carrying every label of ``selector`` (kit's ``SelectEntry``)."""
    matches = [e for e in index.entries if all(e.label_value(k) == v for k, v in selector.items())]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        if not index.entries:
            raise ModelKitIndexError("index contains no ModelKits")
        wanted = ", ".join(f"{k}={v}" for k, v in sorted(selector.items())) or "no labels"
        raise ModelKitIndexError(
            f"no ModelKit in the index has {wanted}. The index contains:\n{describe(index.entries, index_repo)}"
        )
    raise ModelKitIndexError(
        f"{len(matches)} ModelKits in the index match; add labels to select one of:\n{describe(matches, index_repo)}"
    )


def check_entry_is_modelkit(entry: Entry, where: str) -> None:
    """Indexes list ModelKits only: a nested index (which could loop back) is refused, not followed."""
    if entry.media_type == mediatypes.INDEX:
        raise ModelKitIndexError(
            f"{where}: entry {entry.digest} is itself an index; a ModelKit index lists ModelKits only "
            "(nested indexes are not followed)"
        )
    if entry.media_type != mediatypes.MANIFEST:
        raise ModelKitIndexError(
            f"{where}: entry {entry.digest} has media type {entry.media_type!r}, not a ModelKit manifest"
        )


def new_entry(
    digest: str, size: int, manifest: dict[str, Any], tag: str, labels: dict[str, str], annotations: dict[str, str]
) -> Entry:
    """An entry as ``kit index add`` records it: the ModelKit's artifact type, the tag it was
    named by and the total size of its layers."""
    fmt = mediatypes.manifest_format(manifest)
    artifact_type = mediatypes.MODELPACK_ARTIFACT_TYPE if fmt == "modelpack" else mediatypes.ARTIFACT_TYPE
    recorded = dict(annotations)
    if tag:
        recorded[mediatypes.ANNOTATION_ORIGINAL_TAG] = tag
    recorded[mediatypes.ANNOTATION_MODELKIT_SIZE] = str(sum(int(x["size"]) for x in manifest.get("layers") or []))
    return Entry(digest=digest, size=size, annotations=recorded, artifact_type=artifact_type, labels=labels)
