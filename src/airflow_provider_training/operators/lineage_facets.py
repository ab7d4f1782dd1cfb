"""Custom OpenLineage facets of this provider (imported only when OpenLineage is installed)."""

from __future__ import annotations

import attr
from openlineage.client.facet_v2 import DatasetFacet, RunFacet

SCHEMA = "https://airflow-provider-training.dev/spec/facets/1-0-0/{}.json"


@attr.define
class ModelKitDatasetFacet(DatasetFacet):
    reference: str
    digest: str
    mediaType: str = "application/vnd.kitops.modelkit.manifest.v1+json"
    signature: str | None = None
    provenance: str | None = None

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA.format("ModelKitDatasetFacet")


@attr.define
class TrainingJobRunFacet(RunFacet):
    kind: str
    name: str
    namespace: str
    uid: str
    images: list[str] = attr.field(factory=list)

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA.format("TrainingJobRunFacet")


@attr.define
class InferenceServiceRunFacet(RunFacet):
    name: str
    namespace: str
    storageUri: str
    revision: str
    url: str

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA.format("InferenceServiceRunFacet")
