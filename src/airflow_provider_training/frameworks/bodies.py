"""The shapes of the object bodies the controllers build (Kubernetes JSON, as TypedDicts).

Only the keys the builders set are spelled out; a pod's ``spec`` stays a dict because it is the
user's template, kept verbatim with what the operator adds.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from airflow_provider_training.specs.unstructured import OwnerReference


class ObjectMetaBody(TypedDict):
    name: str
    namespace: str
    labels: dict[str, str]
    ownerReferences: list[OwnerReference]
    annotations: NotRequired[dict[str, str]]
    generateName: NotRequired[str]


class PodBody(TypedDict):
    apiVersion: Literal["v1"]
    kind: Literal["Pod"]
    metadata: ObjectMetaBody
    spec: dict[str, Any]
    status: NotRequired[dict[str, Any]]


class ServiceBody(TypedDict):
    apiVersion: Literal["v1"]
    kind: Literal["Service"]
    metadata: ObjectMetaBody
    spec: dict[str, Any]


class ConfigMapBody(TypedDict):
    apiVersion: Literal["v1"]
    kind: Literal["ConfigMap"]
    metadata: ObjectMetaBody
    data: dict[str, str]


class ServiceAccountBody(TypedDict):
    apiVersion: Literal["v1"]
    kind: Literal["ServiceAccount"]
    metadata: ObjectMetaBody


class RoleBody(TypedDict):
    apiVersion: Literal["rbac.authorization.k8s.io/v1"]
    kind: Literal["Role"]
    metadata: ObjectMetaBody
    rules: list[dict[str, list[str]]]


class RoleBindingBody(TypedDict):
    apiVersion: Literal["rbac.authorization.k8s.io/v1"]
    kind: Literal["RoleBinding"]
    metadata: ObjectMetaBody
    subjects: list[dict[str, str]]
    roleRef: dict[str, str]
