"""Kubeflow Trainer v2.3.0's ``TrainJobStatus`` feature as pure functions (``trainer-v2.md`` §5.6):

- the plugin (``pkg/runtime/framework/plugins/trainjobstatus``): every container of the trainer's
  pods gets ``KUBEFLOW_TRAINER_SERVER_URL`` / ``_CA_CERT`` / ``_TOKEN`` and the projected volume
  ``kubeflow-trainer-token`` (a service-account token whose audience is this TrainJob's status
  endpoint, expiring after an hour, and ``ca.crt`` from the ConfigMap ``<tj>-tls-config``);
- the status server's request (``pkg/statusserver``): the body decoded as Go's ``encoding/json``
  decodes it into ``UpdateTrainJobStatusRequest`` (so the same bodies are refused with upstream's
  422 ``Invalid payload``), and the ``trainerStatus`` its server-side apply writes.

The embedded control plane serves the endpoint on its API server (``embedded/apiserver/statusserver.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from airflow_provider_training.frameworks.trainer import upsert
from airflow_provider_training.frameworks.trainer.info import RuntimeInfo
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.unstructured import OwnerReference

INT32 = (-(2**31), 2**31 - 1)


def token_audience(namespace: str, name: str) -> str:
    """``statusserver.TokenAudience``: the audience a TrainJob's status token must carry."""
    return f"{c.GROUP}/{c.VERSION}/namespaces/{namespace}/trainjobs/{name}/status"


def status_path(namespace: str, name: str) -> str:
    """``statusserver.StatusUrl``: where the trainer POSTs its status."""
    return f"/apis/{c.GROUP}/{c.VERSION}/namespaces/{namespace}/trainjobs/{name}/status"


def tls_config_name(trainjob_name: str) -> str:
    return f"{trainjob_name}{c.STATUS_TLS_CONFIGMAP_SUFFIX}"


@dataclass(frozen=True)
class StatusServer:
    """Where the status server listens (``https://host:port``, no path) and its CA certificate."""

    url: str
    ca_pem: str


def enforce(info: RuntimeInfo, server: StatusServer) -> None:
    """``EnforceMLPolicy`` of the TrainJobStatus plugin: env and mount into every container of the
    trainer PodSet (init containers aside, as upstream), the volume into its pod."""
    podset = info.podset_by_ancestor(c.ANCESTOR_TRAINER)
    if podset is None:
        return
    namespace, name = info.trainjob.namespace, info.name
    env = [
        upsert.value(c.STATUS_ENV_URL, server.url.rstrip("/") + status_path(namespace, name)),
        upsert.value(c.STATUS_ENV_CA_CERT, f"{c.STATUS_MOUNT_PATH}/{c.STATUS_CA_CERT_FILE}"),
        upsert.value(c.STATUS_ENV_TOKEN, f"{c.STATUS_MOUNT_PATH}/{c.STATUS_TOKEN_FILE}"),
    ]
    mount = {"name": c.STATUS_TOKEN_VOLUME, "mountPath": c.STATUS_MOUNT_PATH, "readOnly": True}
    pod = info.pod_spec(podset)
    for container in pod.get("containers") or []:
        upsert.env(container, *env)
        upsert.volume_mounts(container, mount)
    upsert.volumes(pod, token_volume(namespace, name))


def token_volume(namespace: str, name: str) -> dict[str, Any]:
    token = {
        "audience": token_audience(namespace, name),
        "expirationSeconds": c.STATUS_TOKEN_EXPIRY_SECONDS,
        "path": c.STATUS_TOKEN_FILE,
    }
    ca = {
        "name": tls_config_name(name),
        "items": [{"key": c.STATUS_CA_CERT_FILE, "path": c.STATUS_CA_CERT_FILE}],
    }
    return {
        "name": c.STATUS_TOKEN_VOLUME,
        "projected": {"sources": [{"serviceAccountToken": token}, {"configMap": ca}]},
    }


def tls_config(namespace: str, name: str, owner: OwnerReference, ca_pem: str) -> dict[str, Any]:
    """``<tj>-tls-config``: the status server's CA certificate, owned by the TrainJob."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": tls_config_name(name), "namespace": namespace, "ownerReferences": [owner]},
        "data": {c.STATUS_CA_CERT_FILE: ca_pem},
    }


# --- the request, decoded as Go's encoding/json decodes it --------------------------------------------


class PayloadError(ValueError):
    """What makes ``json.NewDecoder(r.Body).Decode(&req)`` fail: upstream's 422 ``Invalid payload``."""


@dataclass
class TrainerStatusUpdate:
    """``TrainerStatus`` as decoded: None where the body left a pointer nil."""

    progress_percentage: int | None = None
    estimated_remaining_seconds: int | None = None
    metrics: list[tuple[str, str]] | None = None
    last_updated_time: datetime | None = None


@dataclass
class UpdateRequest:
    trainer_status: TrainerStatusUpdate | None = None


class _Object(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs in order: Go sees repeated keys one after the other."""


class _Float(str):
    """A JSON number with a fraction or exponent: Go refuses it for an int32 field."""


_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z")


def _refuse_constant(name: str) -> Any:
    raise PayloadError(f"invalid character in literal {name}")


def decode_update(raw: bytes) -> UpdateRequest:
    """The first JSON value of ``raw`` (what follows it is not read, as a Go ``Decoder`` does not) as
    ``UpdateTrainJobStatusRequest``: keys match case-insensitively, unknown keys are ignored, a
    repeated key wins last; any type mismatch or syntax error raises :class:`PayloadError`."""
    text = raw.decode("utf-8", errors="replace").lstrip(" \t\r\n")
    decoder = json.JSONDecoder(object_pairs_hook=_Object, parse_float=_Float, parse_constant=_refuse_constant)
    try:
        value, _ = decoder.raw_decode(text)
    except (ValueError, RecursionError) as exc:
        raise PayloadError(str(exc)[:200]) from None
    request = UpdateRequest()
    if value is None:
        return request
    if not isinstance(value, _Object):
        raise PayloadError(f"cannot unmarshal {_json_type(value)} into Go value of type UpdateTrainJobStatusRequest")
    for key, item in value:
        if key.lower() != "trainerstatus":
            continue
        if item is None:
            request.trainer_status = None
        elif isinstance(item, _Object):
            request.trainer_status = request.trainer_status or TrainerStatusUpdate()
            _decode_status(item, request.trainer_status)
        else:
            raise PayloadError(f"cannot unmarshal {_json_type(item)} into field trainerStatus of type TrainerStatus")
    return request


def _json_type(value: Any) -> str:
    if isinstance(value, _Object):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | _Float):
        return "number"
    return "string" if isinstance(value, str) else "value"


def _int32(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or isinstance(value, _Float):
        raise PayloadError(f"cannot unmarshal {_json_type(value)} into field {name} of type int32")
    if not INT32[0] <= value <= INT32[1]:
        raise PayloadError(f"cannot unmarshal number {value} into field {name} of type int32")
    return value


def _string(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or isinstance(value, _Float):
        raise PayloadError(f"cannot unmarshal {_json_type(value)} into field {name} of type string")
    return str(value)


def _decode_status(pairs: list[tuple[str, Any]], status: TrainerStatusUpdate) -> None:
    for key, value in pairs:
        name = key.lower()
        if name == "progresspercentage":
            status.progress_percentage = _int32(value, "progressPercentage")
        elif name == "estimatedremainingseconds":
            status.estimated_remaining_seconds = _int32(value, "estimatedRemainingSeconds")
        elif name == "metrics":
            status.metrics = _metrics(value)
        elif name == "lastupdatedtime":
            status.last_updated_time = _time(value)


def _metrics(value: Any) -> list[tuple[str, str]] | None:
    if value is None:
        return None
    if isinstance(value, _Object) or not isinstance(value, list):
        raise PayloadError(f"cannot unmarshal {_json_type(value)} into field metrics of type []Metric")
    out = []
    for item in value:
        metric = ["", ""]
        if item is not None:
            if not isinstance(item, _Object):
                raise PayloadError(f"cannot unmarshal {_json_type(item)} into field metrics of type Metric")
            for key, part in item:
                if key.lower() == "name":
                    metric[0] = _string(part, "metrics.name")
                elif key.lower() == "value":
                    metric[1] = _string(part, "metrics.value")
        out.append((metric[0], metric[1]))
    return out


def _time(value: Any) -> datetime | None:
    """``metav1.Time.UnmarshalJSON``: null, or an RFC 3339 string (a fraction of a second allowed)."""
    if value is None:
        return None
    if not isinstance(value, str) or isinstance(value, _Float):
        raise PayloadError(f"cannot unmarshal {_json_type(value)} into field lastUpdatedTime of type string")
    match = _RFC3339.match(value)
    if match is None:
        raise PayloadError(f'parsing time "{value[:64]}" as RFC 3339 failed')
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    zone = match.group(8)
    offset = timedelta(0)
    if zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            raise PayloadError(f'parsing time "{value[:64]}": time zone offset out of range')
        offset = sign * timedelta(hours=hours, minutes=minutes)
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=timezone(offset))
    except ValueError as exc:
        raise PayloadError(f'parsing time "{value[:64]}": {exc}') from None
    return moment.astimezone(UTC)


def _rfc3339(moment: datetime) -> str:
    """``metav1.Time`` as the API stores and echoes it: UTC, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def applied_status(update: TrainerStatusUpdate) -> dict[str, Any]:
    """``toApplyConfig``: the ``status.trainerStatus`` the server-side apply sets. A field the body
    left out is not set; ``lastUpdatedTime`` absent leaves the CRD's CEL rule to refuse it."""
    out: dict[str, Any] = {}
    if update.progress_percentage is not None:
        out["progressPercentage"] = update.progress_percentage
    if update.estimated_remaining_seconds is not None:
        out["estimatedRemainingSeconds"] = update.estimated_remaining_seconds
    if update.metrics:
        out["metrics"] = [{"name": name, "value": value} for name, value in update.metrics]
    if update.last_updated_time is not None:
        out["lastUpdatedTime"] = _rfc3339(update.last_updated_time)
    return out


def echo(request: UpdateRequest) -> dict[str, Any]:
    """What upstream answers on success: the decoded request encoded again (Go's ``omitempty``:
    unset pointers and empty metric fields left out, a zero ``lastUpdatedTime`` as null)."""
    status = request.trainer_status
    if status is None:
        return {}
    out = applied_status(status)
    if "metrics" in out:
        out["metrics"] = [{k: v for k, v in metric.items() if v} for metric in out["metrics"]]
    out.setdefault("lastUpdatedTime", None)
    return {"trainerStatus": out}


__all__ = [
    "PayloadError",
    "StatusServer",
    "TrainerStatusUpdate",
    "UpdateRequest",
    "applied_status",
    "decode_update",
    "echo",
    "enforce",
    "status_path",
    "tls_config",
    "tls_config_name",
    "token_audience",
    "token_volume",
]
