"""Discovery (``/version``, ``/api``, ``/apis``, ``APIResourceList``s) and OpenAPI v3.

kubectl asks for aggregated discovery first and accepts the legacy documents served here. Before
``create`` / ``apply`` it reads OpenAPI v3 to learn whether the server validates fields itself: every
PATCH operation names its group-version-kind and a ``fieldValidation`` parameter, so kubectl sends
``fieldValidation=Strict`` and leaves the checking to this server. Training jobs advertise JSON and
merge patches only (as a real API server does for custom resources), so ``kubectl apply`` sends a
merge patch for them; core types are left to kubectl's built-in strategic merge patch.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

from airflow_provider_training.embedded.resources import GROUP_VERSIONS, ResourceType, resources_in
from airflow_provider_training.specs.crds import openapi_schema
from airflow_provider_training.specs.resources import SUBRESOURCE_VERBS
from airflow_provider_training.specs.trainer.crds import openapi_schema as trainer_openapi_schema

KUBERNETES_VERSION = {"major": "1", "minor": "36", "gitVersion": "v1.36.0+airflow-training"}


def version() -> dict[str, Any]:
    return {
        **KUBERNETES_VERSION,
        "gitCommit": "embedded",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "n/a (airflow-provider-training embedded control plane)",
        "compiler": "n/a",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def api_group(name: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in GROUP_VERSIONS[name]]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": versions,
        "preferredVersion": versions[0],
    }


def api_group_list() -> dict[str, Any]:
    groups = [api_group(name) for name in GROUP_VERSIONS]
    for group in groups:
        group.pop("kind")
        group.pop("apiVersion")
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _resource_entry(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
        "storageVersionHash": hashlib.sha256(rt.key.encode()).hexdigest()[:11],
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    return entry


def api_resource_list(group: str, version: str) -> dict[str, Any] | None:
    types = resources_in(group, version)
    if not types:
        return None
    resources = []
    for rt in types:
        resources.append(_resource_entry(rt))
        for sub in rt.subresources:
            entry = {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(SUBRESOURCE_VERBS.get(sub, ("get", "patch", "update"))),
            }
            if sub == "token":  # what kube-apiserver lists: the subresource's own kind and group
                entry.update(group="authentication.k8s.io", version="v1", kind="TokenRequest")
            resources.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


# -- OpenAPI v3 --------------------------------------------------------------------------------
def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _schema_name(rt: ResourceType) -> str:
    return (
        ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind]) if rt.group else f"io.k8s.api.core.v1.{rt.kind}"
    )


def _param(name: str, where: str = "query") -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "schema": {"type": "string", "uniqueItems": True},
        **({"required": True} if where == "path" else {}),
    }


def _operation(
    rt: ResourceType, action: str, params: list[dict[str, Any]], body_types: tuple[str, ...] = ()
) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{_schema_name(rt)}"}
    op: dict[str, Any] = {
        "operationId": f"{action}{rt.kind}",
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
    }
    if body_types:
        op["requestBody"] = {
            "content": {t: {"schema": ref if t == "application/json" else {"type": "object"}} for t in body_types},
            "required": True,
        }
    return op


def openapi_v3_document(group: str, version: str) -> dict[str, Any] | None:
    types = resources_in(group, version)
    if not types:
        return None
    prefix = "/" + _gv_path(group, version)
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    write_params = [_param("dryRun"), _param("fieldManager"), _param("fieldValidation")]
    for rt in types:
        base = f"{prefix}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{prefix}/{rt.plural}"
        scope = [_param("namespace", "path")] if rt.namespaced else []
        item_params = [*scope, _param("name", "path")]
        collection: dict[str, Any] = {"get": _operation(rt, "list", scope)}
        if not rt.stored:  # the review kinds: POST only
            paths[base] = {"post": _operation(rt, "post", scope + write_params, ("application/json",))}
            schemas[_schema_name(rt)] = {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "x-kubernetes-group-version-kind": [{"group": rt.group, "version": rt.version, "kind": rt.kind}],
            }
            continue
        item: dict[str, Any] = {"get": _operation(rt, "get", item_params)}
        if not rt.read_only:
            patch_types = ("application/json-patch+json", "application/merge-patch+json")
            collection["post"] = _operation(rt, "post", scope + write_params, ("application/json", "application/yaml"))
            item["put"] = _operation(rt, "put", item_params + write_params, ("application/json", "application/yaml"))
            item["patch"] = _operation(rt, "patch", item_params + write_params, patch_types)
            item["delete"] = _operation(rt, "delete", item_params)
        paths[base] = collection
        paths[f"{base}/{{name}}"] = item
        if rt.training_job is not None:
            schema = dict(openapi_schema(rt.training_job))
        elif rt.trainer is not None:
            schema = dict(trainer_openapi_schema(rt.trainer))
        else:
            schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        schema["x-kubernetes-group-version-kind"] = [{"group": rt.group, "version": rt.version, "kind": rt.kind}]
        schemas[_schema_name(rt)] = schema
    return {
        "openapi": "3.0.0",
        "info": {
            "title": "Kubernetes (airflow-training embedded control plane)",
            "version": KUBERNETES_VERSION["gitVersion"],
        },
        "paths": paths,
        "components": {"schemas": schemas},
    }


@cache
def openapi_v3_cached(group: str, version: str) -> bytes | None:
    doc = openapi_v3_document(group, version)
    return None if doc is None else json.dumps(doc, separators=(",", ":")).encode()


def openapi_v3_root() -> dict[str, Any]:
    gvs = [("", "v1")] + [(g, v) for g, versions in GROUP_VERSIONS.items() for v in versions]
    paths = {}
    for group, version in gvs:
        body = openapi_v3_cached(group, version)
        assert body is not None
        digest = hashlib.sha512(body).hexdigest()[:32].upper()
        paths[_gv_path(group, version)] = {"serverRelativeURL": f"/openapi/v3/{_gv_path(group, version)}?hash={digest}"}
    return {"paths": paths}
