"""The ClusterTrainingRuntimes a default Kubeflow Trainer v2.3.0 install ships, as package data.

The YAML files under ``runtimes/`` are upstream's ``manifests/base/runtimes/*.yaml`` byte for byte
(torchtune's are not vendored). :func:`default_runtimes` applies what the install overlay
(``manifests/overlays/runtimes``) adds on a real install: the label
``trainer.kubeflow.org/webhook-validation: disabled`` and the ``v2.3.0`` tag on Kubeflow's own
images. An embedded control plane installs these on a fresh start.
"""

from __future__ import annotations

import copy
from functools import cache
from importlib import resources
from typing import Any

import yaml

from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.crds import CLUSTER_TRAINING_RUNTIME, openapi_schema
from airflow_provider_training.specs.trainer.models import TrainingRuntime
from airflow_provider_training.specs.trainer.schema import with_defaults

RELEASE = "v2.3.0"
# Images the overlay's ``images:`` list retags (those of the vendored runtimes and initializers).
PINNED_IMAGES = tuple(
    f"ghcr.io/kubeflow/trainer/{name}"
    for name in (
        "torchtune-trainer",
        "dataset-initializer",
        "model-initializer",
        "mlx-runtime",
        "deepspeed-runtime",
        "xgboost-runtime",
    )
)


@cache
def _raw() -> tuple[tuple[str, str], ...]:
    folder = resources.files(__package__).joinpath("runtimes")
    files = sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".yaml"))
    return tuple((name, folder.joinpath(name).read_text(encoding="utf-8")) for name in files)


def _pin(image: str) -> str:
    return f"{image}:{RELEASE}" if image in PINNED_IMAGES else image


def _overlay(document: dict[str, Any]) -> dict[str, Any]:
    labels = document.setdefault("metadata", {}).setdefault("labels", {})
    labels[c.LABEL_WEBHOOK_VALIDATION] = "disabled"
    for job in document.get("spec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", []):
        pod = job.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
        for group in ("initContainers", "containers"):
            for container in pod.get(group) or []:
                if isinstance(container.get("image"), str):
                    container["image"] = _pin(container["image"])
    return document


def default_runtime_documents(*, install_overlay: bool = True) -> list[dict[str, Any]]:
    """The default ClusterTrainingRuntimes as API objects (new dicts on every call)."""
    documents = copy.deepcopy(_parsed())
    return [_overlay(doc) for doc in documents] if install_overlay else documents


def default_runtime_document(name: str, *, install_overlay: bool = True) -> dict[str, Any] | None:
    """One default ClusterTrainingRuntime as an API object (a new dict), or None if there is none of
    that name. ``migrate`` copies one per generated runtime: copying all ten was most of its time."""
    for document in _parsed():
        if document["metadata"]["name"] == name:
            copied = _copied(document)
            return _overlay(copied) if install_overlay else copied
    return None


def _copied(value: Any) -> Any:
    """A copy of a parsed YAML tree (mappings, lists, scalars; nothing shared): a third of
    ``copy.deepcopy``'s time, which keeps a memo for objects met twice."""
    kind = type(value)
    if kind is dict:
        return {key: _copied(item) for key, item in value.items()}
    if kind is list:
        return [_copied(item) for item in value]
    return value


@cache
def _parsed() -> list[dict[str, Any]]:
    # parsed once: validate/migrate look the runtimes up for every document (9 ms of YAML each time)
    return [yaml.safe_load(text) for _, text in _raw()]


def default_runtimes(*, install_overlay: bool = True) -> dict[str, TrainingRuntime]:
    """The default ClusterTrainingRuntimes by name, with CRD defaults applied as a server stores them
    (copies: a caller may change them)."""
    return {name: runtime.model_copy(deep=True) for name, runtime in _runtimes(install_overlay).items()}


@cache
def _runtimes(install_overlay: bool) -> dict[str, TrainingRuntime]:
    schema = openapi_schema(CLUSTER_TRAINING_RUNTIME)
    runtimes = [
        TrainingRuntime.model_validate(with_defaults(doc, schema))
        for doc in default_runtime_documents(install_overlay=install_overlay)
    ]
    return {runtime.name: runtime for runtime in runtimes}


def default_runtime(name: str) -> TrainingRuntime | None:
    return default_runtimes().get(name)
