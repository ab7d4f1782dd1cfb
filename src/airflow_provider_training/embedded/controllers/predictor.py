"""What the embedded InferenceService controller runs for a predictor: the revision of a spec and
its Pod, built the way KServe's raw-deployment mode builds it.

A Pod has the ``storage-initializer`` init container (KitOps' KServe storage container: it pulls the
``kit://`` ModelKit and unpacks it into ``/mnt/models``, an ``emptyDir`` named
``kserve-provision-location``) and the ``kserve-container``: the built-in TorchScript runtime for
``modelFormat`` ``pytorch`` / ``torchscript``, or the user's ``predictor.containers[0]``.

Differences from a cluster, because there is no container engine and pods share the host's network:
the containers run this package's Python modules (``command`` is set, images are labels only);
the predictor listens on ``$(POD_IP):$(PORT)``, a port allocated per pod (a custom container must
bind there too), instead of ``0.0.0.0:8080``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import airflow_provider_training
from airflow_provider_training.specs.resources import BY_KEY
from airflow_provider_training.specs.unstructured import Unstructured, controller_ref

INFERENCESERVICES = BY_KEY["serving.kserve.io/inferenceservices"]
KIT_SCHEME = "kit://"
STORAGE_URI_ENV = "STORAGE_URI"
MODEL_DIR = "/mnt/models"
MODEL_VOLUME = "kserve-provision-location"
STORAGE_INITIALIZER = "storage-initializer"
PREDICTOR_CONTAINER = "kserve-container"
STORAGE_INITIALIZER_IMAGE = "ghcr.io/kitops-ml/kitops-kserve:latest"
TORCHSCRIPT_IMAGE = "airflow-provider-training/torchscript-runtime:embedded"
TORCHSCRIPT_RUNTIME = "kserve-torchscript-embedded"
# Formats the built-in runtime serves (KServe's name for TorchScript models is ``pytorch``).
BUILTIN_FORMATS = ("pytorch", "torchscript")
READY_PATH = "/v2/health/ready"

ISVC_LABEL = "serving.kserve.io/inferenceservice"
COMPONENT_LABEL = "component"
REVISION_LABEL = "serving.kserve.io/revision"
STORAGE_SECRET_ANNOTATION = "serving.kserve.io/storage-secret"
"""Annotation on the InferenceService naming a Secret whose keys (``KIT_USER``, ``KIT_PASSWORD``,
``KIT_UNPACK_FLAGS``) reach the storage-initializer's environment, as the KitOps ClusterStorageContainer's
``env`` does on a cluster."""


class PredictorSpecError(ValueError):
    """The predictor cannot be run; ``reason`` is KServe's failure reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Predictor:
    """The desired predictor of an InferenceService."""

    revision: str  # pod and revision name: ``<isvc>-predictor-<hash>``
    storage_uri: str | None
    builtin: bool
    container: dict[str, Any]  # the serving container as given (custom) or as built (built-in)
    ready_path: str | None  # HTTP readiness path, None = TCP connect


def package_root() -> str:
    """The directory that holds ``airflow_provider_training``: put on the containers' PYTHONPATH so
    they run the same code as the daemon."""
    return str(Path(airflow_provider_training.__file__).resolve().parents[1])


def revision_of(isvc: Unstructured) -> str:
    """A revision name that changes exactly when the predictor spec (or the storage secret) changes."""
    predictor = (isvc.get("spec") or {}).get("predictor") or {}
    secret = ((isvc.get("metadata") or {}).get("annotations") or {}).get(STORAGE_SECRET_ANNOTATION, "")
    digest = hashlib.sha256(json.dumps([predictor, secret], sort_keys=True).encode()).hexdigest()[:8]
    base = isvc["metadata"]["name"][: 63 - len("-predictor-") - 8]
    return f"{base}-predictor-{digest}"


def desired(isvc: Unstructured) -> Predictor:
    """Interpret ``spec.predictor``; raises :class:`PredictorSpecError` with KServe's reasons."""
    spec = isvc.get("spec") or {}
    predictor = spec.get("predictor")
    if not isinstance(predictor, dict):
        raise PredictorSpecError("InvalidPredictorSpec", "spec.predictor is required")
    model = predictor.get("model")
    containers = predictor.get("containers") or []
    if model and containers:
        raise PredictorSpecError("InvalidPredictorSpec", "spec.predictor: set either model or containers, not both")
    revision = revision_of(isvc)
    if model:
        fmt = str(((model.get("modelFormat") or {}).get("name")) or "").lower()
        if not fmt:
            raise PredictorSpecError("InvalidPredictorSpec", "spec.predictor.model.modelFormat.name is required")
        if fmt not in BUILTIN_FORMATS or model.get("runtime") not in (None, TORCHSCRIPT_RUNTIME):
            raise PredictorSpecError(
                "NoSupportingRuntime",
                f"no serving runtime of the embedded control plane supports modelFormat {fmt!r}"
                + (f" with runtime {model['runtime']!r}" if model.get("runtime") else "")
                + f"; the built-in runtime serves {', '.join(BUILTIN_FORMATS)} (TorchScript), "
                "or use spec.predictor.containers with a command",
            )
        uri = model.get("storageUri")
        _check_uri(uri, "spec.predictor.model.storageUri", required=True)
        return Predictor(revision, uri, True, model, READY_PATH)
    if containers:
        container = containers[0]
        if not container.get("command"):
            raise PredictorSpecError(
                "InvalidPredictorSpec",
                "spec.predictor.containers[0].command is required: the embedded control plane runs no image "
                "entrypoints",
            )
        uri = next((e.get("value") for e in container.get("env") or [] if e.get("name") == STORAGE_URI_ENV), None)
        _check_uri(uri, f"spec.predictor.containers[0].env[{STORAGE_URI_ENV}]", required=False)
        probe = ((container.get("readinessProbe") or {}).get("httpGet") or {}).get("path")
        return Predictor(revision, uri, False, container, probe)
    raise PredictorSpecError(
        "InvalidPredictorSpec", "spec.predictor needs model (modelFormat + storageUri) or containers"
    )


def _check_uri(uri: Any, field: str, *, required: bool) -> None:
    if uri is None and not required:
        return
    if not isinstance(uri, str) or not uri.startswith(KIT_SCHEME) or len(uri) <= len(KIT_SCHEME):
        raise PredictorSpecError(
            "InvalidPredictorSpec",
            f"{field} must be a kit://<registry>/<namespace>/<repository>:<tag> ModelKit reference "
            f"(got {uri!r}); the embedded control plane's storage initializer is KitOps'",
        )


def build_pod(isvc: Unstructured, predictor: Predictor, port: int) -> Unstructured:
    """The Pod of ``predictor`` for ``isvc``, owned by it (deleting the InferenceService deletes it)."""
    meta = isvc["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    python_path = {"name": "PYTHONPATH", "value": package_root()}
    pod_env: list[dict[str, Any]] = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "PORT", "value": str(port)},
    ]
    mount = {"name": MODEL_VOLUME, "mountPath": MODEL_DIR}
    if predictor.builtin:
        model = predictor.container
        container: dict[str, Any] = {
            "name": PREDICTOR_CONTAINER,
            "image": TORCHSCRIPT_IMAGE,
            "command": [sys.executable, "-m", "airflow_provider_training.embedded.workloads.torchscript"],
            "args": [
                f"--model-dir={MODEL_DIR}",
                f"--model-name={name}",
                "--host=$(POD_IP)",
                "--port=$(PORT)",
                *[str(a) for a in model.get("args") or []],
            ],
            "env": [*pod_env, python_path, *(model.get("env") or [])],
            "ports": [{"name": "http1", "containerPort": port, "protocol": "TCP"}],
            "readinessProbe": {"httpGet": {"path": READY_PATH, "port": port}, "periodSeconds": 1},
            "volumeMounts": [{**mount, "readOnly": True}],
        }
        if model.get("resources"):
            container["resources"] = model["resources"]
    else:
        container = json.loads(json.dumps(predictor.container))
        container.setdefault("name", PREDICTOR_CONTAINER)
        names = {e.get("name") for e in container.get("env") or []}
        container["env"] = [*(e for e in pod_env if e["name"] not in names), *(container.get("env") or [])]
        container["ports"] = [{"name": "http1", "containerPort": port, "protocol": "TCP"}]
        if predictor.storage_uri:
            mounts = [m for m in container.get("volumeMounts") or [] if m.get("mountPath") != MODEL_DIR]
            container["volumeMounts"] = [*mounts, {**mount, "readOnly": True}]
    pod: Unstructured = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": predictor.revision,
            "namespace": namespace,
            "labels": {
                ISVC_LABEL: name,
                COMPONENT_LABEL: "predictor",
                REVISION_LABEL: predictor.revision,
                "app": f"{name}-predictor",
            },
            "annotations": {"serving.kserve.io/storage-initializer-sourceuri": predictor.storage_uri or ""},
            "ownerReferences": [controller_ref(isvc, INFERENCESERVICES)],
        },
        "spec": {
            "containers": [container],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 5,
            "volumes": [{"name": MODEL_VOLUME, "emptyDir": {}}] if predictor.storage_uri else [],
        },
    }
    if predictor.storage_uri:
        initializer: dict[str, Any] = {
            "name": STORAGE_INITIALIZER,
            "image": STORAGE_INITIALIZER_IMAGE,
            "command": [sys.executable, "-m", "airflow_provider_training.embedded.workloads.storage_initializer"],
            "args": [predictor.storage_uri, MODEL_DIR],
            "env": [python_path],
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "volumeMounts": [mount],
        }
        secret = (meta.get("annotations") or {}).get(STORAGE_SECRET_ANNOTATION)
        if secret:
            initializer["envFrom"] = [{"secretRef": {"name": secret}}]
        pod["spec"]["initContainers"] = [initializer]
    return pod
