"""SLSA v1 provenance of a ModelKit as an in-toto v1 statement (subject = the manifest digest).

The build is the Airflow run that trained and packed the model: ``externalParameters`` hold what a
user chose (the DAG, the run's Params and conf, the training job as submitted), ``internalParameters``
what the platform decided (run id, task ids, the training job's uid), ``resolvedDependencies`` the
inputs with their versions (Asset events, training images, the code layer), and ``runDetails.builder``
names this provider and its version. Pure data: the Airflow layer gathers the facts.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_training import __version__

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://airflow-provider-training.dev/modelkit-build/v1"
BUILDER_ID = "https://airflow-provider-training.dev/builder/airflow"


@dataclass
class TrainingJobFacts:
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    images: list[str] = field(default_factory=list)
    task_id: str = ""


@dataclass
class AssetInput:
    uri: str
    name: str = ""
    version: str = ""  # the Asset event that triggered the run (id / timestamp), if any
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class BuildFacts:
    dag_id: str
    run_id: str
    task_ids: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    conf: dict[str, Any] = field(default_factory=dict)
    training_jobs: list[TrainingJobFacts] = field(default_factory=list)
    inputs: list[AssetInput] = field(default_factory=list)
    source: str = ""  # the packed directory
    airflow_version: str = ""
    started_on: str = ""
    finished_on: str = ""


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _digest_map(digest: str) -> dict[str, str]:
    algo, _, value = digest.partition(":")
    return {algo: value} if value else {}


def statement(
    repository: str,
    digest: str,
    facts: BuildFacts,
    layers: list[dict[str, Any]],
    reference: str = "",
) -> dict[str, Any]:
    """The in-toto statement for ModelKit ``repository``@``digest`` with layer descriptors ``layers``
    (``mediaType``, ``digest``, ``path``)."""
    deps: list[dict[str, Any]] = []
    for asset in facts.inputs:
        dep: dict[str, Any] = {"uri": asset.uri, "name": asset.name or asset.uri}
        annotations = {k: v for k, v in {"version": asset.version, **asset.extra}.items() if v not in (None, "")}
        if annotations:
            dep["annotations"] = annotations
        deps.append(dep)
    for job in facts.training_jobs:
        for image in job.images:
            deps.append({"uri": f"oci://{image}", "name": f"{job.kind}/{job.name} image"})
    for layer in layers:
        kind = str(layer.get("kind") or layer.get("mediaType", ""))
        if ".code." in str(layer.get("mediaType", "")) or kind == "code":
            deps.append(
                {
                    "uri": f"modelkit-layer:{layer.get('path') or '.'}",
                    "name": "code layer",
                    "digest": _digest_map(str(layer["digest"])),
                }
            )
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": repository, "digest": _digest_map(digest)}],
        "predicateType": SLSA_PROVENANCE_V1,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "dag_id": facts.dag_id,
                    "params": facts.params,
                    "conf": facts.conf,
                    "reference": reference,
                    "source": facts.source,
                },
                "internalParameters": {
                    "run_id": facts.run_id,
                    "task_ids": facts.task_ids,
                    "training_jobs": [
                        {
                            "kind": j.kind,
                            "name": j.name,
                            "namespace": j.namespace,
                            "uid": j.uid,
                            "images": j.images,
                            "task_id": j.task_id,
                        }
                        for j in facts.training_jobs
                    ],
                },
                "resolvedDependencies": deps,
            },
            "runDetails": {
                "builder": {
                    "id": BUILDER_ID,
                    "version": {
                        "airflow-provider-training": __version__,
                        **({"apache-airflow": facts.airflow_version} if facts.airflow_version else {}),
                    },
                },
                "metadata": {
                    "invocationId": f"{facts.dag_id}/{facts.run_id}",
                    "startedOn": facts.started_on or _now(),
                    "finishedOn": facts.finished_on or _now(),
                },
                "byproducts": [
                    {
                        "name": str(x.get("path") or "."),
                        "digest": _digest_map(str(x["digest"])),
                        "mediaType": x.get("mediaType"),
                    }
                    for x in layers
                ],
            },
        },
    }
