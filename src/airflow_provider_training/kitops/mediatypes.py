"""OCI media types and annotations of a ModelKit (``kitops.md`` §2.1-2.2)."""

from __future__ import annotations

import re

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
ARTIFACT_TYPE = "application/vnd.kitops.modelkit.manifest.v1+json"
CONFIG = "application/vnd.kitops.modelkit.config.v1+json"
MODELPACK_CONFIG = "application/vnd.cncf.model.config.v1+json"
MODELPACK_ARTIFACT_TYPE = "application/vnd.cncf.model.manifest.v1+json"

ANNOTATION_CLI_VERSION = "ml.kitops.modelkit.cli-version"
ANNOTATION_FILEPATH = "org.cncf.model.filepath"
ANNOTATION_SUBTYPE = "ml.kitops.modelkit.layer-subtype"
ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"

# kind used in the Kitfile model -> base type in the media type
_BASE = {
    "model": "model",
    "modelpart": "modelpart",
    "code": "code",
    "dataset": "dataset",
    "docs": "docs",
    "prompt": "code",
}
_SUFFIX = {"none": "", "gzip": "+gzip", "gzip-fastest": "+gzip", "zstd": "+zstd"}
_LAYER_RE = re.compile(r"^application/vnd\.kitops\.modelkit\.(\w+)\.v1\.(tar|raw)(?:\+(\w+))?$")


def layer_media_type(kind: str, compression: str) -> str:
    return f"application/vnd.kitops.modelkit.{_BASE[kind]}.v1.tar{_SUFFIX[compression]}"


def parse_layer_media_type(media_type: str) -> tuple[str, str, str]:
    """(base type, format, compression) of a KitOps layer media type."""
    m = _LAYER_RE.match(media_type)
    if not m:
        raise ValueError(f"not a ModelKit layer media type: {media_type}")
    return m[1], m[2], m[3] or "none"


def is_modelkit_manifest(manifest: dict[str, object]) -> bool:
    config = manifest.get("config")
    media = config.get("mediaType") if isinstance(config, dict) else None
    return media == CONFIG or manifest.get("artifactType") in (ARTIFACT_TYPE,)
