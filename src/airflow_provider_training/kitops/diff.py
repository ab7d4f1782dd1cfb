"""``kit diff``: what changed between two ModelKits (or ModelPacks), local or in a registry.

Like kit's ``diff``: identical digests, config, annotations, shared layers and layers unique to
either side. Beyond kit: layers are paired by Kitfile section and path, and for a pair whose digest
differs the two layers are read (streamed, never stored) to name the files added, removed or
changed inside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.compression import open_decompressed
from airflow_provider_training.kitops.modelpack import read_kitfile

OpenBlob = Callable[[str], contextlib.AbstractContextManager[IO[bytes]]]


@dataclass
class Side:
    """One ModelKit to compare: its reference text, manifest digest, manifest, config bytes and a way
    to open a layer blob as a stream."""

    reference: str
    digest: str
    manifest: dict[str, Any]
    config: bytes
    open_blob: OpenBlob


@dataclass
class FileChange:
    path: str
    change: str  # added | removed | modified
    size_a: int | None = None
    size_b: int | None = None


@dataclass
class LayerChange:
    change: str  # shared | modified | only_a | only_b
    section: str  # model, modelpart, code, dataset, docs
    path: str
    media_type: str
    digest_a: str | None = None
    digest_b: str | None = None
    size_a: int | None = None
    size_b: int | None = None
    files: list[FileChange] = field(default_factory=list)


@dataclass
class DiffResult:
    reference_a: str
    reference_b: str
    digest_a: str
    digest_b: str
    identical: bool
    same_config: bool
    annotations_match: bool
    layers: list[LayerChange] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _layer_keys(side: Side) -> list[tuple[tuple[str, str], dict[str, Any]]]:
    """Each layer keyed by (section, path): from the layer annotation, else the Kitfile entry."""
    try:
        kf = read_kitfile(side.manifest, side.config, side.reference)
        by_digest = {info.digest: path for _, _, info, path in kf.layer_entries() if info.digest}
    except ValueError:
        by_digest = {}
    out = []
    for layer in side.manifest.get("layers") or []:
        base, _, _ = mediatypes.parse_layer_media_type(layer["mediaType"])
        path = (layer.get("annotations") or {}).get(mediatypes.ANNOTATION_FILEPATH) or by_digest.get(
            layer["digest"], ""
        )
        out.append(((base, path), layer))
    return out


def _file_table(side: Side, layer: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """``{name: (sha256, size)}`` of the regular files in a layer, read as a stream."""
    _, layer_format, compression = mediatypes.parse_layer_media_type(layer["mediaType"])
    table: dict[str, tuple[str, int]] = {}
    with side.open_blob(layer["digest"]) as fh:
        if layer_format == "raw":
            sha = hashlib.sha256()
            size = 0
            while chunk := fh.read(1 << 20):
                sha.update(chunk)
                size += len(chunk)
            name = (layer.get("annotations") or {}).get(mediatypes.ANNOTATION_FILEPATH, layer["digest"])
            table[name] = (sha.hexdigest(), size)
            return table
        stored = layer.get("size")
        what = f"layer {layer['digest']}"
        stream = open_decompressed(fh, compression, stored if isinstance(stored, int) else 0, what)
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                src = tar.extractfile(member)
                sha = hashlib.sha256()
                assert src is not None
                while chunk := src.read(1 << 20):
                    sha.update(chunk)
                table[member.name] = (sha.hexdigest(), member.size)
    return table


def _files(a: Side, la: dict[str, Any], b: Side, lb: dict[str, Any]) -> list[FileChange]:
    ta, tb = _file_table(a, la), _file_table(b, lb)
    changes = []
    for name in sorted(set(ta) | set(tb)):
        if name not in tb:
            changes.append(FileChange(name, "removed", size_a=ta[name][1]))
        elif name not in ta:
            changes.append(FileChange(name, "added", size_b=tb[name][1]))
        elif ta[name] != tb[name]:
            changes.append(FileChange(name, "modified", ta[name][1], tb[name][1]))
    return changes


def diff(a: Side, b: Side, files: bool = True) -> DiffResult:
    """Compare ``a`` and ``b``; ``files`` reads changed layers to list the files that differ."""
    result = DiffResult(
        a.reference,
        b.reference,
        a.digest,
        b.digest,
        identical=a.digest == b.digest,
        same_config=a.manifest["config"]["digest"] == b.manifest["config"]["digest"],
        annotations_match=(a.manifest.get("annotations") or {}) == (b.manifest.get("annotations") or {}),
    )
    if result.identical:
        return result
    keys_a, keys_b = _layer_keys(a), _layer_keys(b)
    digests_b = {layer["digest"] for _, layer in keys_b}
    digests_a = {layer["digest"] for _, layer in keys_a}
    unmatched_b = {key: layer for key, layer in keys_b if layer["digest"] not in digests_a}
    for key, la in keys_a:
        section, path = key
        if la["digest"] in digests_b:
            result.layers.append(
                LayerChange(
                    "shared", section, path, la["mediaType"], la["digest"], la["digest"], la["size"], la["size"]
                )
            )
            continue
        lb = unmatched_b.pop(key, None)
        if lb is None:
            result.layers.append(
                LayerChange("only_a", section, path, la["mediaType"], la["digest"], None, la["size"], None)
            )
            continue
        change = LayerChange(
            "modified", section, path, lb["mediaType"], la["digest"], lb["digest"], la["size"], lb["size"]
        )
        if files:
            change.files = _files(a, la, b, lb)
        result.layers.append(change)
    for (section, path), lb in unmatched_b.items():
        result.layers.append(
            LayerChange("only_b", section, path, lb["mediaType"], None, lb["digest"], None, lb["size"])
        )
    return result


def _short(digest: str | None) -> str:
    return (digest or "")[:19]


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def render(result: DiffResult) -> Iterator[str]:
    """Text output, in kit's section order, with the changed files under each modified layer."""
    if result.identical:
        yield "ModelKits are identical"
        return
    yield "Comparing:"
    yield f"  ModelKit1: {result.reference_a} ({_short(result.digest_a)})"
    yield f"  ModelKit2: {result.reference_b} ({_short(result.digest_b)})"
    yield ""
    yield "Configurations: " + ("identical" if result.same_config else "differ")
    yield "Annotations: " + ("identical" if result.annotations_match else "differ")
    yield ""
    titles = {
        "shared": "Shared layers",
        "modified": "Changed layers",
        "only_a": f"Layers only in ModelKit1 ({result.reference_a})",
        "only_b": f"Layers only in ModelKit2 ({result.reference_b})",
    }
    for change, title in titles.items():
        layers = [x for x in result.layers if x.change == change]
        yield title
        yield "---------------------------------------"
        if not layers:
            yield "<none>"
        for layer in layers:
            digest = layer.digest_b if change in ("modified", "only_b") else layer.digest_a
            size = layer.size_b if change in ("modified", "only_b") else layer.size_a
            yield f"{layer.section:<10} {layer.path or '.':<30} {_short(digest):<20} {_size(size)}"
            for f in layer.files:
                sizes = f"{_size(f.size_a)} -> {_size(f.size_b)}"
                yield f"    {f.change:<9} {f.path}  ({sizes})"
        yield ""
