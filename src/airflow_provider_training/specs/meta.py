"""ObjectMeta: the fields the project reads; everything else is kept as written."""

from __future__ import annotations

from typing import Any

from airflow_provider_training.specs.base import KubeModel


class OwnerReference(KubeModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    finalizers: list[str] | None = None
    owner_references: list[OwnerReference] | None = None

    def label(self, key: str, default: str | None = None) -> str | None:
        return (self.labels or {}).get(key, default)

    def annotation(self, key: str, default: str | None = None) -> str | None:
        return (self.annotations or {}).get(key, default)


def object_meta_dict(meta: ObjectMeta | None) -> dict[str, Any]:
    return meta.to_dict() if meta is not None else {}
