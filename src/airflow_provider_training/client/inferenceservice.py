"""KServe InferenceServices for the deploy operator: the manifest it applies and what the status says
about the rollout it started (pure functions over API dicts; the same on a cluster and embedded).

A rollout of generation G is **ready** when ``status.observedGeneration >= G``, ``Ready`` is True and,
where KServe reports revisions, ``latestReadyRevision == latestCreatedRevision`` (the new model
serves, not the old one). It has **failed** when, for that generation, ``modelStatus.transitionStatus``
is ``BlockedByFailedLoad`` or ``InvalidSpec`` (KServe's reason is ``modelStatus.lastFailureInfo.reason``),
or ``Ready`` is False with a reason KServe gives only for a dead end.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

API_VERSION = "serving.kserve.io/v1beta1"
KIND = "InferenceService"
KIT_SCHEME = "kit://"
STORAGE_SECRET_ANNOTATION = "serving.kserve.io/storage-secret"
FAILED_TRANSITIONS = ("BlockedByFailedLoad", "InvalidSpec")


@dataclass(frozen=True)
class RolloutState:
    finished: bool
    ready: bool
    reason: str = ""
    message: str = ""
    url: str = ""
    revision: str = ""

    @property
    def failed(self) -> bool:
        return self.finished and not self.ready


def storage_uri(reference: str) -> str:
    """``kit://<reference>`` for a ModelKit reference (a ``kit://`` URI is returned as it is)."""
    reference = reference.strip()
    if not reference:
        raise ValueError(
            "storage_uri is empty: give a ModelKit reference (registry/namespace/repo:tag) or a kit:// URI"
        )
    return reference if "://" in reference else KIT_SCHEME + reference


def manifest(
    name: str,
    namespace: str,
    *,
    storage_uri: str | None = None,
    model_format: str = "pytorch",
    base: dict[str, Any] | None = None,
    storage_secret: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The InferenceService to apply: ``base`` (a full manifest, kept as written) or a minimal one
    serving ``model_format`` from ``storage_uri``; ``storage_uri`` overrides the base's."""
    doc: dict[str, Any] = copy.deepcopy(base) if base else {}
    doc.setdefault("apiVersion", API_VERSION)
    doc.setdefault("kind", KIND)
    if doc["kind"] != KIND:
        raise ValueError(f"inference_service: kind is {doc['kind']!r}; expected {KIND}")
    meta = doc.setdefault("metadata", {})
    meta["name"] = name or meta.get("name")
    meta["namespace"] = namespace or meta.get("namespace") or "default"
    if not meta["name"]:
        raise ValueError("name is required (the InferenceService's metadata.name)")
    if labels:
        meta.setdefault("labels", {}).update(labels)
    if storage_secret:
        meta.setdefault("annotations", {})[STORAGE_SECRET_ANNOTATION] = storage_secret
    predictor = doc.setdefault("spec", {}).setdefault("predictor", {})
    if storage_uri is not None:
        containers = predictor.get("containers")
        if containers:
            env = containers[0].setdefault("env", [])
            env[:] = [e for e in env if e.get("name") != "STORAGE_URI"] + [
                {"name": "STORAGE_URI", "value": storage_uri}
            ]
        else:
            model = predictor.setdefault("model", {})
            model.setdefault("modelFormat", {"name": model_format})
            model["storageUri"] = storage_uri
    if not predictor.get("model") and not predictor.get("containers"):
        raise ValueError(
            "the InferenceService has no predictor: give storage_uri (a ModelKit reference) or an "
            "inference_service manifest with spec.predictor.model or spec.predictor.containers"
        )
    return doc


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def rollout_state(obj: dict[str, Any], generation: int) -> RolloutState:
    """How the rollout of ``generation`` stands."""
    status = obj.get("status") or {}
    url = str(status.get("url") or "")
    predictor = (status.get("components") or {}).get("predictor") or {}
    revision = str(predictor.get("latestReadyRevision") or "")
    if int(status.get("observedGeneration") or 0) < generation:
        return RolloutState(False, False, "Pending", "the controller has not seen this generation yet", url)
    model = status.get("modelStatus") or {}
    if model.get("transitionStatus") in FAILED_TRANSITIONS:
        info = model.get("lastFailureInfo") or {}
        return RolloutState(
            True,
            False,
            str(info.get("reason") or model["transitionStatus"]),
            str(info.get("message") or ""),
            url,
            revision,
        )
    ready = _condition(status, "Ready") or {}
    created = predictor.get("latestCreatedRevision")
    if ready.get("status") == "True" and (not created or created == predictor.get("latestReadyRevision")):
        return RolloutState(True, True, "", "", url, revision)
    waiting = _condition(status, "LatestDeploymentReady") or ready
    return RolloutState(False, False, str(waiting.get("reason") or "Pending"), str(waiting.get("message") or ""), url)


def served_storage_uri(obj: dict[str, Any] | None) -> str | None:
    """The ``kit://`` URI the InferenceService's predictor names (None when there is none)."""
    if not obj:
        return None
    predictor = (obj.get("spec") or {}).get("predictor") or {}
    uri = (predictor.get("model") or {}).get("storageUri")
    if uri:
        return str(uri)
    for container in predictor.get("containers") or []:
        for env in container.get("env") or []:
            if env.get("name") == "STORAGE_URI" and env.get("value"):
                return str(env["value"])
    return None
