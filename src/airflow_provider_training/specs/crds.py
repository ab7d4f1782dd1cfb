"""The upstream CRDs (v1.9.4; MXJob from v1.8.1), vendored as gzipped JSON by ``tools/vendor_crds.py``."""

from __future__ import annotations

import gzip
import json
from functools import cache
from importlib import resources
from typing import Any

from airflow_provider_training.specs.kinds import ALL_KINDS, KindInfo


@cache
def crd(info: KindInfo) -> dict[str, Any]:
    """The whole CustomResourceDefinition object of a kind, as the API server serves it."""
    data = resources.files(__package__).joinpath(f"crds/{info.plural}.json.gz").read_bytes()
    loaded: dict[str, Any] = json.loads(gzip.decompress(data))
    return loaded


def all_crds() -> list[dict[str, Any]]:
    return [crd(info) for info in ALL_KINDS]


def openapi_schema(info: KindInfo) -> dict[str, Any]:
    """The structural ``openAPIV3Schema`` of the kind's only served version."""
    schema: dict[str, Any] = crd(info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema
