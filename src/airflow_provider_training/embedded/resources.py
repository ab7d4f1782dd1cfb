"""The resource types the embedded API server serves: the one table in ``specs.resources``, under
the names the control plane's modules use."""

from airflow_provider_training.specs.resources import (
    ALL_VERBS,
    BY_KEY,
    BY_KIND,
    BY_PATH,
    CRDS,
    EVENTS,
    GROUP_VERSIONS,
    INITIAL_NAMESPACES,
    METADATA_FIELDS,
    NAMESPACES,
    PODS,
    PVCS,
    READ_VERBS,
    RESOURCE_TYPES,
    ResourceType,
    resources_in,
)

__all__ = [
    "ALL_VERBS",
    "BY_KEY",
    "BY_KIND",
    "BY_PATH",
    "CRDS",
    "EVENTS",
    "GROUP_VERSIONS",
    "INITIAL_NAMESPACES",
    "METADATA_FIELDS",
    "NAMESPACES",
    "PODS",
    "PVCS",
    "READ_VERBS",
    "RESOURCE_TYPES",
    "ResourceType",
    "resources_in",
]
