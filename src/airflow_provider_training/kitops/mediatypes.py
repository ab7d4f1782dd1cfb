"""OCI media types and annotations of a ModelKit and of a CNCF ModelPack (``kitops.md`` §2.1-2.2, §2.5).

kit >= v1.10 writes either format (``--use-model-pack``) and reads both: the manifest's
``artifactType`` decides, and the config media type is the fallback for manifests without one.
"""

from __future__ import annotations

import re
from typing import Any, Literal

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
ARTIFACT_TYPE = "application/vnd.kitops.modelkit.manifest.v1+json"
CONFIG = "application/vnd.kitops.modelkit.config.v1+json"
MODELPACK_CONFIG = "application/vnd.cncf.model.config.v1+json"
MODELPACK_ARTIFACT_TYPE = "application/vnd.cncf.model.manifest.v1+json"
INDEX_ARTIFACT_TYPE = "application/vnd.kitops.modelkit.index.v1+json"  # kit >= 1.17 ModelKit indexes

ANNOTATION_CLI_VERSION = "ml.kitops.modelkit.cli-version"
ANNOTATION_KITFILE = "ml.kitops.modelkit.kitfile"
ANNOTATION_FILEPATH = "org.cncf.model.filepath"
ANNOTATION_FILE_METADATA = "org.cncf.model.file.metadata+json"
ANNOTATION_SUBTYPE = "ml.kitops.modelkit.layer-subtype"
ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"
# recorded on ModelKit index entries by `kit index add` (kit >= 1.17)
ANNOTATION_ORIGINAL_TAG = "ml.kitops.modelkit.original-tag"
ANNOTATION_MODELKIT_SIZE = "ml.kitops.modelkit.size"

Format = Literal["kitops", "modelpack"]
FORMATS: tuple[str, ...] = ("kitops", "modelpack")
LAYER_FORMATS: tuple[str, ...] = ("tar", "raw")

# kind used in the Kitfile model -> base type in the media type, per format
_KITOPS_BASE = {
    "model": "model",
    "modelpart": "modelpart",
    "code": "code",
    "dataset": "dataset",
    "docs": "docs",
    "prompt": "code",
}
_MODELPACK_BASE = {
    "model": "weight",
    "modelpart": "weight.config",
    "code": "code",
    "dataset": "dataset",
    "docs": "doc",
    "prompt": "code",
}
# ModelPack base type -> the KitOps base type it maps back to (kit's GetKitfileForManifest)
_FROM_MODELPACK = {"weight": "model", "weight.config": "modelpart", "code": "code", "dataset": "dataset", "doc": "docs"}
_SUFFIX = {"none": "", "gzip": "+gzip", "gzip-fastest": "+gzip", "zstd": "+zstd"}
_KITOPS_LAYER_RE = re.compile(r"^application/vnd\.kitops\.modelkit\.(\w+)\.v1\.(tar|raw)(?:\+(\w+))?$")
_MODELPACK_LAYER_RE = re.compile(
    r"^application/vnd\.cncf\.model\.(weight\.config|weight|code|dataset|doc)\.v1\.(tar|raw)(?:\+(\w+))?$"
)
_COMPRESSIONS = ("", "none", "gzip", "zstd")  # kit's ParseCompression (gzip-fastest is written as +gzip)


class MediaTypeError(ValueError):
    pass


def layer_media_type(kind: str, compression: str, layer_format: str = "tar", modelpack: bool = False) -> str:
    """The media type kit writes for a layer of ``kind`` (a Kitfile section: model, modelpart, …)."""
    if layer_format not in LAYER_FORMATS:
        raise MediaTypeError(f"layer format {layer_format!r} is not one of {', '.join(LAYER_FORMATS)}")
    if layer_format == "raw" and compression != "none":
        # kit: raw layers are stored verbatim (SaveModelOptions.Validate)
        raise MediaTypeError(f"raw layers cannot be compressed (got compression {compression!r}; use 'none')")
    if modelpack:
        return f"application/vnd.cncf.model.{_MODELPACK_BASE[kind]}.v1.{layer_format}{_SUFFIX[compression]}"
    return f"application/vnd.kitops.modelkit.{_KITOPS_BASE[kind]}.v1.{layer_format}{_SUFFIX[compression]}"


def parse_layer_media_type(media_type: str) -> tuple[str, str, str]:
    """(KitOps base type, format, compression) of a KitOps or ModelPack layer media type; ModelPack
    base types are mapped to KitOps' (weight -> model, weight.config -> modelpart, doc -> docs)."""
    m = _KITOPS_LAYER_RE.match(media_type)
    if m:
        base = m[1]
    else:
        m = _MODELPACK_LAYER_RE.match(media_type)
        if not m:
            raise MediaTypeError(f"not a ModelKit or ModelPack layer media type: {media_type}")
        base = _FROM_MODELPACK[m[1]]
    compression = m[3] or ""
    if compression not in _COMPRESSIONS:
        raise MediaTypeError(
            f"layer media type {media_type} has an unknown compression +{compression} (kit reads +gzip, +zstd or none)"
        )
    return base, m[2], compression or "none"


def manifest_format(manifest: dict[str, Any]) -> Format | None:
    """``kitops`` or ``modelpack`` as kit decides it (artifactType, else config media type); None
    when the manifest is neither."""
    artifact = manifest.get("artifactType")
    if artifact == ARTIFACT_TYPE:
        return "kitops"
    if artifact == MODELPACK_ARTIFACT_TYPE:
        return "modelpack"
    config = manifest.get("config")
    media = config.get("mediaType") if isinstance(config, dict) else None
    if media == CONFIG:
        return "kitops"
    if media == MODELPACK_CONFIG:
        return "modelpack"
    return None


def is_modelkit_manifest(manifest: dict[str, Any]) -> bool:
    return manifest_format(manifest) is not None


def validate_manifest(manifest: dict[str, Any], where: str = "manifest") -> Format:
    """Check a manifest against kit's rules; returns its format. Raises :class:`MediaTypeError`
    naming the offending layer."""
    fmt = manifest_format(manifest)
    if fmt is None:
        config = manifest.get("config")
        config = config if isinstance(config, dict) else {}
        raise MediaTypeError(
            f"{where} is not a ModelKit or ModelPack (artifactType {manifest.get('artifactType')!r}, config "
            f"media type {config.get('mediaType')!r})"
        )
    config_type = manifest["config"].get("mediaType")
    want_config = CONFIG if fmt == "kitops" else MODELPACK_CONFIG
    if config_type != want_config:
        raise MediaTypeError(f"{where}: a {fmt} manifest needs config media type {want_config} (got {config_type})")
    prefix = "application/vnd.kitops.modelkit." if fmt == "kitops" else "application/vnd.cncf.model."
    for i, layer in enumerate(manifest.get("layers") or []):
        media = str(layer.get("mediaType", ""))
        if not media.startswith(prefix):
            raise MediaTypeError(f"{where}: layer {i} ({layer.get('digest')}) has media type {media}, not a {fmt} one")
        _, layer_format, compression = parse_layer_media_type(media)
        annotations = layer.get("annotations") or {}
        if fmt == "modelpack" and layer_format == "raw" and compression != "none":
            raise MediaTypeError(f"{where}: layer {i} ({layer.get('digest')}) is raw and compressed ({media})")
        has_kitfile = ANNOTATION_KITFILE in (manifest.get("annotations") or {})
        if fmt == "modelpack" and not has_kitfile and not annotations.get(ANNOTATION_FILEPATH):
            raise MediaTypeError(
                f"{where}: ModelPack layer {i} ({layer.get('digest')}) has no {ANNOTATION_FILEPATH} annotation"
            )
    return fmt
