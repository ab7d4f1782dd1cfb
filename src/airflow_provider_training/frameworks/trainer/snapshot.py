"""Runtime snapshots (``pkg/runtime/core/snapshot.go``): on a TrainJob's first build the runtime it
references is written, as YAML, into the ConfigMap ``<tj>-runtime-snapshot`` (key ``runtime``, owned
by the TrainJob); every later build reads that copy instead of the live runtime, so editing or
deleting the runtime never changes an existing TrainJob's objects. Pure: the caller reads and
creates the ConfigMap.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.crds import TRAINJOB
from airflow_provider_training.specs.trainer.models import TrainJob
from airflow_provider_training.specs.unstructured import controller_ref

INVALID = "invalid runtime snapshot"


class SnapshotError(ValueError):
    """A snapshot ConfigMap that cannot stand for the TrainJob's runtime (upstream's wording)."""


def snapshot_name(trainjob_name: str) -> str:
    return f"{trainjob_name}{c.RUNTIME_SNAPSHOT_SUFFIX}"


def runtime_snapshot(trainjob: TrainJob, runtime: dict[str, Any]) -> dict[str, Any]:
    """``createRuntimeSnapshot``: the runtime object as stored, serialized as ``sigs.k8s.io/yaml``
    does (through JSON, so keys sorted), owned by the TrainJob (controller, blockOwnerDeletion)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": snapshot_name(trainjob.name),
            "namespace": trainjob.namespace,
            "ownerReferences": [controller_ref(trainjob, TRAINJOB)],
        },
        "data": {c.RUNTIME_SNAPSHOT_KEY: yaml.safe_dump(runtime, sort_keys=True, default_flow_style=False)},
    }


def read_snapshot(configmap: dict[str, Any], trainjob: TrainJob) -> dict[str, Any]:
    """``getRuntimeSnapshot``: the runtime object kept in ``configmap``; raises :class:`SnapshotError`
    if the ConfigMap is not this TrainJob's, has no ``runtime`` key, does not parse, or names another
    runtime than ``spec.runtimeRef``."""
    owners = (configmap.get("metadata") or {}).get("ownerReferences") or []
    controller = next((o for o in owners if isinstance(o, dict) and o.get("controller")), None)
    if controller is None or controller.get("uid") != trainjob.metadata.uid:
        raise SnapshotError(f"{INVALID}: a snapshot configmap exists but is owned by another object")
    text = (configmap.get("data") or {}).get(c.RUNTIME_SNAPSHOT_KEY)
    if text is None:
        raise SnapshotError(f"{INVALID}: snapshot ConfigMap missing {json.dumps(c.RUNTIME_SNAPSHOT_KEY)} data key")
    try:
        runtime = yaml.safe_load(str(text))
    except yaml.YAMLError as exc:
        raise SnapshotError(f"{INVALID}: unable to unmarshal the snapshot: {str(exc)[:300]}") from None
    if not isinstance(runtime, dict):
        raise SnapshotError(f"{INVALID}: unable to unmarshal the snapshot: not an object")
    ref = trainjob.spec.runtime_ref
    api_version = str(runtime.get("apiVersion") or "")
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    kind = str(runtime.get("kind") or "")
    name = str((runtime.get("metadata") or {}).get("name") or "")
    if (
        (ref.kind is not None and kind != ref.kind)
        or (ref.api_group is not None and group != ref.api_group)
        or (name != ref.name)
    ):
        expected = [ref.name, ref.api_group or "<any>", ref.kind or "<any>"]
        found = [name, group, kind]
        raise SnapshotError(
            f"{INVALID}: the snapshot refers to the wrong runtime: expecting a runtime with name, api group and "
            f"kind of {', '.join(json.dumps(v) for v in expected)} but found runtime with name, api group and kind "
            f"of {', '.join(json.dumps(v) for v in found)}"
        )
    return runtime


__all__ = ["SnapshotError", "read_snapshot", "runtime_snapshot", "snapshot_name"]
