"""``kit pack``: Kitfile -> layer blobs -> config -> manifest -> local store (``kitops.md`` §2).

Manifests follow the kit >= v1.10 shape (artifactType, ``org.cncf.model.filepath`` layer annotations)
without the 2026 creation timestamp, so packing the same directory twice gives the same digest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_training import __version__
from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.ignore import Ignore
from airflow_provider_training.kitops.reference import Reference
from airflow_provider_training.kitops.store import Descriptor, LocalStore
from airflow_provider_training.kitops.tarlayer import COMPRESSIONS, ProgressFn, write_layer
from airflow_provider_training.specs.kitfile import (
    DEFAULT_KITFILE_NAMES,
    Kitfile,
    KitfileError,
    LayerInfo,
    check,
    clean_path,
    go_json,
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


def build_manifest(config: Descriptor, layers: list[PackedLayer], annotations: dict[str, str]) -> bytes:
    layer_list: list[dict[str, Any]] | None = None
    if layers:
        layer_list = []
        for layer in layers:
            ann = {mediatypes.ANNOTATION_FILEPATH: layer.path}
            if layer.kind == "prompt":
                ann[mediatypes.ANNOTATION_SUBTYPE] = "prompt"
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
        "artifactType": mediatypes.ARTIFACT_TYPE,
        "config": config.to_json(),
        "layers": layer_list,
        "annotations": dict(sorted(annotations.items())),
    }
    return go_json(manifest)


def pack(
    context: str | Path,
    *,
    kitfile: str | Path | Kitfile | None = None,
    reference: Reference | None = None,
    compression: str = "none",
    store: LocalStore | None = None,
    progress: ProgressFn | None = None,
    on_layer: Callable[[PackedLayer], None] | None = None,
) -> PackResult:
    """Pack ``context`` into the local store and tag it with ``reference`` (and its extra tags)."""
    ctx = Path(context).absolute()
    if not ctx.is_dir():
        raise FileNotFoundError(f"ModelKit source directory {ctx} does not exist or is not a directory")
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression {compression!r} is not one of {', '.join(COMPRESSIONS)}")
    store = store or LocalStore()
    kf, source = load_kitfile(ctx, kitfile)
    for warning in check(kf, source):
        log.warning("%s", warning)

    entries = list(kf.layer_entries())
    layer_paths = [clean_path(path) for _, _, _, path in entries]
    extra_ignores = parent_layer_paths(kf, store)
    ignore = Ignore.load(ctx, layer_paths, extra=extra_ignores)

    packed: list[PackedLayer] = []
    for (kind, _, info, raw_path), path in zip(entries, layer_paths, strict=True):
        if ignore.matcher.matches_or_parent_matches(path) and path != ".":
            log.warning("Layer path %s is excluded by .kitignore; the layer will be (nearly) empty", path)
        with store.new_blob_file() as (fh, tmp):
            blob = write_layer(ctx, path, ignore, fh, compression, progress)
        store.adopt_blob(tmp, blob.digest)
        if blob.file_count == 0:
            log.warning("No files detected for %s layer %s", kind, raw_path or ".")
        _fill(info, blob.digest, blob.diff_id)
        layer = PackedLayer(
            kind, path, mediatypes.layer_media_type(kind, compression), blob.digest, blob.diff_id, blob.size
        )
        packed.append(layer)
        if on_layer:
            on_layer(layer)

    config_bytes = kf.to_config_json()
    config = Descriptor(mediatypes.CONFIG, store.put_bytes(config_bytes), len(config_bytes))
    manifest = build_manifest(config, packed, {mediatypes.ANNOTATION_CLI_VERSION: CLI_VERSION})
    manifest_desc = Descriptor(mediatypes.MANIFEST, store.put_bytes(manifest), len(manifest))
    if reference is not None:
        tags = [t for t in (reference.tag or "latest", *reference.extra_tags) if t]
        store.add_manifest(reference.repo_key, manifest_desc, tags)
    else:
        store.add_manifest(UNTAGGED_REPO, manifest_desc, [])
    total = manifest_desc.size + config.size + sum(layer.size for layer in packed)
    log.info("Model saved: %s", manifest_desc.digest)
    return PackResult(manifest_desc.digest, total, reference, packed, config.digest, manifest)


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
        parent = Kitfile.from_config_json(store.read_blob(manifest["config"]["digest"]), str(ref))
        paths.extend(clean_path(p) for _, _, _, p in parent.layer_entries())
        ref_text = parent.model_reference()
    return paths
