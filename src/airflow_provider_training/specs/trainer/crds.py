"""The vendored Trainer v2.3.0 and JobSet v0.12.0 CRDs (``specs/crds/SOURCES.md``)."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from airflow_provider_training.specs.trainer import constants as c


@dataclass(frozen=True)
class TrainerKind:
    kind: str
    api_version: str
    plural: str
    namespaced: bool


TRAINJOB = TrainerKind(c.TRAINJOB, c.API_VERSION, "trainjobs", True)
TRAINING_RUNTIME = TrainerKind(c.TRAINING_RUNTIME, c.API_VERSION, "trainingruntimes", True)
CLUSTER_TRAINING_RUNTIME = TrainerKind(c.CLUSTER_TRAINING_RUNTIME, c.API_VERSION, "clustertrainingruntimes", False)
JOBSET = TrainerKind(c.JOBSET, c.JOBSET_API_VERSION, "jobsets", True)

ALL_TRAINER_KINDS = (TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME, JOBSET)
TRAINER_KINDS = {info.kind: info for info in ALL_TRAINER_KINDS}


@cache
def crd(info: TrainerKind) -> dict[str, Any]:
    """The whole CustomResourceDefinition of a kind, as the API server serves it."""
    data = resources.files("airflow_provider_training.specs").joinpath(f"crds/{info.plural}.json.gz").read_bytes()
    loaded: dict[str, Any] = json.loads(gzip.decompress(data))
    return loaded


def all_crds() -> list[dict[str, Any]]:
    return [crd(info) for info in ALL_TRAINER_KINDS]


def openapi_schema(info: TrainerKind) -> dict[str, Any]:
    """The structural ``openAPIV3Schema`` of the kind's only served version."""
    schema: dict[str, Any] = crd(info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema
