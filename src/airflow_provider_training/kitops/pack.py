"""``kit pack``: Kitfile -> layer blobs -> config -> manifest -> local store (``kitops.md`` §2).

Manifests follow the kit >= v1.10 shape (artifactType, ``org.cncf.model.filepath`` layer annotations)
without the 2026 creation timestamp, so packing the same directory twice gives the same digest.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from airflow_provider_training import __version__
from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.ignore import Ignore
from airflow_provider_training.kitops.localstore import Descriptor, LocalStore
from airflow_provider_training.kitops.modelpack import config_json as modelpack_config
from airflow_provider_training.kitops.modelpack import kitfile_json, read_kitfile
from airflow_provider_training.kitops.rawlayer import check_raw, write_raw
from airflow_provider_training.kitops.reference import Reference
from airflow_provider_training.kitops.tarlayer import COMPRESSIONS, LayerBlob, ProgressFn, write_layer
from airflow_provider_training.specs.gojson import go_json
from airflow_provider_training.specs.kitfile import (
    DEFAULT_KITFILE_NAMES,
    Kitfile,
    KitfileError,
    LayerInfo,
    check,
    clean_path,
)

log = logging.getLogger(__name__)

CLI_VERSION = f"airflow-provider-training/{__version__}"
UNTAGGED_REPO = "localhost/_"
MAX_REFERENCE_HOPS = 10


@dataclass(frozen=True)
class PackedLayer:
    kind: str
    path: str  # cleaned layer path
    media_type: str
    digest: str
    diff_id: str
    size: int
    metadata: str | None = None  # raw layers: the file-metadata annotation

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "mediaType": self.media_type,
            "digest": self.digest,
            "diffId": self.diff_id,
            "size": self.size,
        }


@dataclass
class PackResult:
    digest: str  # manifest digest
    size: int  # manifest + config + layers, in bytes
    reference: Reference | None
    layers: list[PackedLayer] = field(default_factory=list)
    config_digest: str = ""
    manifest: bytes = b""
    transferred: int = 0  # pack --push: bytes uploaded


def find_kitfile(context: Path) -> Path | None:
    for name in DEFAULT_KITFILE_NAMES:
        if (context / name).is_file():
            return context / name
    return None


def load_kitfile(context: Path, kitfile: str | Path | Kitfile | None) -> tuple[Kitfile, str]:
    """The Kitfile to pack: an object, YAML text, a path, the context's own, or a generated one."""
    if isinstance(kitfile, Kitfile):
        return kitfile.model_copy(deep=True), "Kitfile"
    if isinstance(kitfile, Path) or (isinstance(kitfile, str) and "\n" not in kitfile and kitfile.strip()):
        path = Path(kitfile)
        if not path.is_absolute() and not path.exists():
            path = context / path
        if not path.is_file():
            raise KitfileError(f"Kitfile {kitfile} not found (give a path to an existing Kitfile or YAML text)")
        return Kitfile.from_yaml(path.read_bytes(), str(path)), str(path)
    if isinstance(kitfile, str):
        return Kitfile.from_yaml(kitfile, "kitfile"), "kitfile"
    found = find_kitfile(context)
    if found is not None:
        return Kitfile.from_yaml(found.read_bytes(), str(found)), str(found)
    from airflow_provider_training.kitops.generate import generate_kitfile

    log.info("No Kitfile in %s; generating one from its contents", context)
    return generate_kitfile(context), "generated Kitfile"


def build_manifest(
    config: Descriptor,
    layers: list[PackedLayer],
    annotations: dict[str, str],
    artifact_type: str = mediatypes.ARTIFACT_TYPE,
) -> bytes:
    layer_list: list[dict[str, Any]] | None = None
    if layers:
        layer_list = []
        for layer in layers:
            ann = {mediatypes.ANNOTATION_FILEPATH: layer.path}
            if layer.kind == "prompt":
                ann[mediatypes.ANNOTATION_SUBTYPE] = "prompt"
            if layer.metadata:
                ann[mediatypes.ANNOTATION_FILE_METADATA] = layer.metadata
            layer_list.append(
                {
                    "mediaType": layer.media_type,
                    "digest": layer.digest,
                    "size": layer.size,
                    "annotations": dict(sorted(ann.items())),
                }
            )
    manifest: dict[str, Any] = {
        "schemaVersion": 2,
        "artifactType": artifact_type,
        "config": config.to_json(),
        "layers": layer_list,
        "annotations": dict(sorted(annotations.items())),
    }
    return go_json(manifest)


LayerWriter = Callable[[BinaryIO], tuple[LayerBlob, str | None]]
BlobSink = Callable[[LayerWriter], tuple[LayerBlob, str | None]]


def store_sink(store: LocalStore) -> BlobSink:
    """Layers go to a temp file in the store's cache, then into ``blobs/sha256`` under their digest."""

    def sink(write: LayerWriter) -> tuple[LayerBlob, str | None]:
        with store.new_blob_file() as (fh, tmp):
            blob, metadata = write(fh)
        store.adopt_blob(tmp, blob.digest)
        return blob, metadata

    return sink


@dataclass(frozen=True)
class Assembled:
    config: bytes
    config_descriptor: Descriptor
    manifest: bytes
    layers: list[PackedLayer]


def check_options(compression: str, layer_format: str) -> None:
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression {compression!r} is not one of {', '.join(COMPRESSIONS)}")
    if layer_format not in mediatypes.LAYER_FORMATS:
        raise ValueError(f"layer format {layer_format!r} is not one of {', '.join(mediatypes.LAYER_FORMATS)}")
    if layer_format == "raw" and compression != "none":
        raise ValueError(f"raw layers are stored verbatim and cannot be compressed (compression {compression!r})")


def build(
    ctx: Path,
    kf: Kitfile,
    sink: BlobSink,
    *,
    parents_from: LocalStore,
    compression: str = "none",
    layer_format: str = "tar",
    modelpack: bool = False,
    progress: ProgressFn | None = None,
    on_layer: Callable[[PackedLayer], None] | None = None,
) -> Assembled:
    """Write every layer of ``kf`` through ``sink``; returns the config and manifest (not stored)."""
    if modelpack and kf.mcp_servers:
        raise KitfileError("mcpServers cannot be packed as a ModelPack (kit refuses them with --use-model-pack)")
    entries = list(kf.layer_entries())
    layer_paths = [clean_path(path) for _, _, _, path in entries]
    if layer_format == "raw":  # fail before writing anything
        for (kind, _, _, _), path in zip(entries, layer_paths, strict=True):
            check_raw(ctx, path, kind)
    extra_ignores = parent_layer_paths(kf, parents_from)
    ignore = Ignore.load(ctx, layer_paths, extra=extra_ignores)

    packed: list[PackedLayer] = []
    for (kind, _, info, raw_path), path in zip(entries, layer_paths, strict=True):
        if layer_format == "raw":

            def write(fh: BinaryIO, path: str = path, kind: str = kind) -> tuple[LayerBlob, str | None]:
                return write_raw(ctx, path, kind, fh, progress)

        else:
            if ignore.matcher.matches_or_parent_matches(path) and path != ".":
                log.warning("Layer path %s is excluded by .kitignore; the layer will be (nearly) empty", path)

            def write(fh: BinaryIO, path: str = path, kind: str = kind) -> tuple[LayerBlob, str | None]:
                return write_layer(ctx, path, ignore, fh, compression, progress), None

        blob, metadata = sink(write)
        if blob.file_count == 0:
            log.warning("No files detected for %s layer %s", kind, raw_path or ".")
        _fill(info, blob.digest, blob.diff_id)
        media_type = mediatypes.layer_media_type(kind, compression, layer_format, modelpack)
        layer = PackedLayer(kind, path, media_type, blob.digest, blob.diff_id, blob.size, metadata)
        packed.append(layer)
        if on_layer:
            on_layer(layer)

    annotations = {mediatypes.ANNOTATION_CLI_VERSION: CLI_VERSION}
    if modelpack:
        config_bytes = modelpack_config(kf, [layer.diff_id for layer in packed])
        config = Descriptor(mediatypes.MODELPACK_CONFIG, _sha256(config_bytes), len(config_bytes))
        annotations[mediatypes.ANNOTATION_KITFILE] = kitfile_json(kf)
        artifact_type = mediatypes.MODELPACK_ARTIFACT_TYPE
    else:
        config_bytes = kf.to_config_json()
        config = Descriptor(mediatypes.CONFIG, _sha256(config_bytes), len(config_bytes))
        artifact_type = mediatypes.ARTIFACT_TYPE
    manifest = build_manifest(config, packed, annotations, artifact_type)
    return Assembled(config_bytes, config, manifest, packed)


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def pack(
    context: str | Path,
    *,
    kitfile: str | Path | Kitfile | None = None,
    reference: Reference | None = None,
    compression: str = "none",
    store: LocalStore | None = None,
    progress: ProgressFn | None = None,
    on_layer: Callable[[PackedLayer], None] | None = None,
    modelpack: bool = False,
    layer_format: str = "tar",
) -> PackResult:
    """Pack ``context`` into the local store and tag it with ``reference`` (and its extra tags).
    ``modelpack`` writes the CNCF ModelPack format (kit's ``--use-model-pack``); ``layer_format``
    ``raw`` stores each layer's single file verbatim (kit's ``--layer-format raw``)."""
    ctx = Path(context).absolute()
    if not ctx.is_dir():
        raise FileNotFoundError(f"ModelKit source directory {ctx} does not exist or is not a directory")
    check_options(compression, layer_format)
    store = store or LocalStore()
    kf, source = load_kitfile(ctx, kitfile)
    for warning in check(kf, source):
        log.warning("%s", warning)
    built = build(
        ctx,
        kf,
        store_sink(store),
        parents_from=store,
        compression=compression,
        layer_format=layer_format,
        modelpack=modelpack,
        progress=progress,
        on_layer=on_layer,
    )
    store.put_bytes(built.config)
    manifest_desc = Descriptor(mediatypes.MANIFEST, store.put_bytes(built.manifest), len(built.manifest))
    if reference is not None:
        tags = [t for t in (reference.tag or "latest", *reference.extra_tags) if t]
        store.add_manifest(reference.repo_key, manifest_desc, tags)
    else:
        store.add_manifest(UNTAGGED_REPO, manifest_desc, [])
    total = manifest_desc.size + built.config_descriptor.size + sum(layer.size for layer in built.layers)
    log.info("Model saved: %s", manifest_desc.digest)
    return PackResult(
        manifest_desc.digest, total, reference, built.layers, built.config_descriptor.digest, built.manifest
    )


def _fill(info: LayerInfo, digest: str, diff_id: str) -> None:
    info.digest = digest
    info.diff_id = diff_id


def parent_layer_paths(kf: Kitfile, store: LocalStore) -> list[str]:
    """Layer paths of the ModelKit chain that ``model.path`` references (§1.5), from the local store;
    they are ignored so this kit does not duplicate them."""
    from airflow_provider_training.kitops.reference import parse

    paths: list[str] = []
    seen: set[str] = set()
    ref_text = kf.model_reference()
    hops = 0
    while ref_text:
        hops += 1
        if ref_text in seen:
            raise KitfileError(f"found cycle in ModelKit references: {ref_text} is referenced twice")
        if hops > MAX_REFERENCE_HOPS:
            raise KitfileError(f"ModelKit reference chain is longer than {MAX_REFERENCE_HOPS}: {ref_text}")
        seen.add(ref_text)
        ref = parse(ref_text, default_tag="latest")
        desc = store.resolve(ref)
        manifest = store.read_manifest(desc)
        parent = read_kitfile(manifest, store.read_blob(manifest["config"]["digest"]), str(ref))
        paths.extend(clean_path(p) for _, _, _, p in parent.layer_entries())
        ref_text = parent.model_reference()
    return paths
