"""Validation of built-in objects as kube-apiserver's ``ValidateX`` functions do it, after they
decoded (``structure``): object names, labels and annotations, ConfigMap / Secret keys and sizes,
and the pod rules whose breach would let a path leave its volume (``subPath``, ``items[].path``,
``claimName``). These are rules in Go code upstream, not in the OpenAPI document, so they are
written here, with the upstream messages. Each problem is a (field path, message) pair for a 422.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from airflow_provider_training.embedded.apiserver import errors, structure
from airflow_provider_training.embedded.resources import ResourceType
from airflow_provider_training.specs.unstructured import Unstructured

Issues = list[tuple[str, str]]

DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = rf"{DNS1123_LABEL}(\.{DNS1123_LABEL})*"
QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE = rf"({QUALIFIED_NAME})?"
CONFIG_KEY = r"[-._a-zA-Z0-9]+"
MAX_ANNOTATIONS_BYTES = 256 * 1024
MAX_CONFIG_BYTES = 1024 * 1024  # a ConfigMap's or Secret's data, together
POD_RESTART_POLICIES = ("Always", "OnFailure", "Never")
RBAC_GROUP = "rbac.authorization.k8s.io"

_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{DNS1123_SUBDOMAIN}')"
)
_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    f"and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    f"'{DNS1123_LABEL}')"
)


def _q(value: Any) -> str:
    text = str(value)
    return '"' + (text[:80] + "..." if len(text) > 80 else text).replace("\n", "\\n") + '"'


def subdomain(path: str, value: Any) -> Issues:
    return _dns_name(path, value, 253, DNS1123_SUBDOMAIN, _SUBDOMAIN_MESSAGE)


def dns_label(path: str, value: Any) -> Issues:
    return _dns_name(path, value, 63, DNS1123_LABEL, _LABEL_MESSAGE)


def _dns_name(path: str, value: Any, limit: int, pattern: str, message: str) -> Issues:
    if not isinstance(value, str) or not value:
        return [(path, "Required value")]
    if len(value) > limit:
        return [(path, f"Too long: may not be more than {limit} bytes")]
    if not re.fullmatch(pattern, value):
        return [(path, f"Invalid value: {_q(value)}: {message}")]
    return []


def path_segment_name(path: str, name: Any) -> Issues:
    """``path.IsValidPathSegmentName``: the name rule of RBAC objects (``system:basic-user`` is fine)."""
    if not isinstance(name, str) or not name:
        return [(path, "Required value: name or generateName is required")] if path == "metadata.name" else []
    if name in (".", ".."):
        return [(path, f"Invalid value: {_q(name)}: may not be '{name}'")]
    return [(path, f"Invalid value: {_q(name)}: may not contain '{c}'") for c in ("/", "%") if c in name]


def qualified_name(path: str, key: str) -> Issues:
    prefix, _, name = key.rpartition("/")
    issues: Issues = []
    if "/" in key and (not prefix or len(prefix) > 253 or not re.fullmatch(DNS1123_SUBDOMAIN, prefix)):
        issues.append((path, f"Invalid value: {_q(key)}: prefix part {_SUBDOMAIN_MESSAGE}"))
    if not name or len(name) > 63 or not re.fullmatch(QUALIFIED_NAME, name):
        issues.append(
            (
                path,
                f"Invalid value: {_q(key)}: name part must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character, at most 63 characters (e.g. 'MyName',  "
                f"or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED_NAME}')",
            )
        )
    return issues


def metadata(rt: ResourceType, meta: dict[str, Any]) -> Issues:
    issues: Issues = []
    name = meta.get("name")
    if rt.key in ("core/namespaces", "core/services"):
        issues += dns_label("metadata.name", name)
    elif rt.group == RBAC_GROUP:
        issues += path_segment_name("metadata.name", name)
    else:
        issues += subdomain("metadata.name", name)
    issues += metadata_labels(meta)
    annotations = meta.get("annotations") or {}
    for key in annotations:
        issues += qualified_name("metadata.annotations", key.lower())
    size = sum(len(k) + len(v or "") for k, v in annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        issues.append(("metadata.annotations", f"Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes"))
    for i, ref in _items(meta.get("ownerReferences")):
        for key in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(key):
                issues.append((f"metadata.ownerReferences[{i}].{key}", "Required value"))
    return issues


def config_keys(path: str, keys: list[str]) -> Issues:
    issues: Issues = []
    for key in keys:
        where = f"{path}[{key[:80]}]"
        if len(key) > 253:
            issues.append((where, "Too long: may not be more than 253 bytes"))
        elif not re.fullmatch(CONFIG_KEY, key):
            issues.append(
                (
                    where,
                    f"Invalid value: {_q(key)}: a valid config key must consist of alphanumeric characters, '-', "
                    f"'_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
                    f"'{CONFIG_KEY}')",
                )
            )
        elif key in (".", "..") or key.startswith(".."):
            issues.append((where, f"Invalid value: {_q(key)}: must not be '.' or '..' and must not start with '..'"))
    return issues


def base64_values(rt: ResourceType, data: dict[str, Any]) -> int:
    """The decoded size; a value that is not base64 is a 400, as kube-apiserver cannot decode it."""
    size = 0
    for key, value in data.items():
        if value is None:
            continue
        try:
            size += len(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            raise errors.bad_request(
                f'{rt.kind} in version "v1" cannot be handled as a {rt.kind}: illegal base64 data in {_field(key)} '
                "(put plain text under stringData, or base64-encode the value)"
            ) from None
    return size


def _field(key: str) -> str:
    return f"data[{key[:80]}]"


def relative_path(path: str, value: Any, required: bool = True) -> Issues:
    if not isinstance(value, str) or not value:
        return [(path, "Required value")] if required else []
    if value.startswith("/"):
        return [(path, f"Invalid value: {_q(value)}: must be a relative path")]
    if ".." in value.split("/"):
        return [(path, f"Invalid value: {_q(value)}: must not contain '..'")]
    if "\x00" in value:
        return [(path, f"Invalid value: {_q(value)}: must not contain a NUL character")]
    return []


def pod_spec(spec: Any, path: str) -> Issues:
    if not isinstance(spec, dict):
        return [(path, "Required value")]
    issues: Issues = []
    volumes: set[Any] = set()
    for i, volume in _items(spec.get("volumes")):
        where = f"{path}.volumes[{i}]"
        issues += dns_label(f"{where}.name", volume.get("name"))
        if _key(volume.get("name")) in volumes:
            issues.append((f"{where}.name", f"Duplicate value: {_q(volume.get('name'))}"))
        volumes.add(_key(volume.get("name")))
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, dict):
            issues += subdomain(f"{where}.persistentVolumeClaim.claimName", claim.get("claimName"))
        host = volume.get("hostPath")
        if isinstance(host, dict) and not host.get("path"):
            issues.append((f"{where}.hostPath.path", "Required value"))
        for source in ("configMap", "secret"):
            body = volume.get(source)
            if not isinstance(body, dict):
                continue
            for j, item in _items(body.get("items")):
                issues += relative_path(f"{where}.{source}.items[{j}].path", item.get("path"))
                if not item.get("key"):
                    issues.append((f"{where}.{source}.items[{j}].key", "Required value"))
        projected = volume.get("projected")
        for j, projection in _items(projected.get("sources") if isinstance(projected, dict) else None):
            for kind in ("configMap", "secret"):
                chosen = projection.get(kind)
                for k, item in _items(chosen.get("items") if isinstance(chosen, dict) else None):
                    issues += relative_path(f"{where}.projected.sources[{j}].{kind}.items[{k}].path", item.get("path"))
    containers = spec.get("containers")
    if not containers:
        issues.append((f"{path}.containers", "Required value"))
    names: set[Any] = set()
    for group in ("initContainers", "containers"):
        for i, container in _items(spec.get(group)):
            where = f"{path}.{group}[{i}]"
            issues += dns_label(f"{where}.name", container.get("name"))
            if _key(container.get("name")) in names:
                issues.append((f"{where}.name", f"Duplicate value: {_q(container.get('name'))}"))
            names.add(_key(container.get("name")))
            for j, mount in _items(container.get("volumeMounts")):
                at = f"{where}.volumeMounts[{j}]"
                if not mount.get("name"):
                    issues.append((f"{at}.name", "Required value"))
                elif _key(mount["name"]) not in volumes:
                    issues.append((f"{at}.name", f"Not found: {_q(mount['name'])}"))
                if not mount.get("mountPath"):
                    issues.append((f"{at}.mountPath", "Required value"))
                issues += relative_path(f"{at}.subPath", mount.get("subPath"), required=False)
            for j, var in _items(container.get("env")):
                name = var.get("name")
                if not name:
                    issues.append((f"{where}.env[{j}].name", "Required value"))
                elif not isinstance(name, str) or "=" in name or not name.isprintable() or not name.isascii():
                    issues.append(
                        (
                            f"{where}.env[{j}].name",
                            f"Invalid value: {_q(name)}: a valid environment variable name must consist only of "
                            "printable ASCII characters other than '='",
                        )
                    )
            for j, port in _items(container.get("ports")):
                number = port.get("containerPort")
                if not isinstance(number, int) or not 0 < number < 65536:
                    issues.append(
                        (f"{where}.ports[{j}].containerPort", f"Invalid value: {number}: must be between 1 and 65535")
                    )
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in POD_RESTART_POLICIES:
        issues.append(
            (
                f"{path}.restartPolicy",
                f'Unsupported value: {_q(policy)}: supported values: "Always", "OnFailure", "Never"',
            )
        )
    for name in ("terminationGracePeriodSeconds", "activeDeadlineSeconds"):
        value = spec.get(name)
        if isinstance(value, int) and value < 0:
            issues.append((f"{path}.{name}", f"Invalid value: {value}: must be greater than or equal to 0"))
    return issues


def validate(rt: ResourceType, obj: Unstructured) -> None:
    """Raise the 422 (or, for undecodable Secret data, the 400) kube-apiserver answers ``obj`` with."""
    meta = obj.get("metadata") or {}
    issues = metadata(rt, meta)
    if rt.key in ("core/configmaps", "core/secrets"):
        data = obj.get("data") or {}
        issues += config_keys("data", list(data))
        if rt.key == "core/secrets":
            size = base64_values(rt, data)
            issues += config_keys("stringData", list(obj.get("stringData") or {}))
        else:
            binary = obj.get("binaryData") or {}
            issues += config_keys("binaryData", list(binary))
            size = sum(len((v or "").encode()) for v in data.values()) + base64_values(rt, binary)
            for key in set(data) & set(binary):
                issues.append(
                    (f"data[{key[:80]}]", f"Invalid value: {_q(key)}: duplicate of key present in binaryData")
                )
        if size > MAX_CONFIG_BYTES:
            issues.append(("data", f"Too long: must have at most {MAX_CONFIG_BYTES} bytes"))
    elif rt.key == "core/pods":
        issues += pod_spec(obj.get("spec"), "spec")
    elif rt.key == "batch/jobs":
        template = (obj.get("spec") or {}).get("template")
        if isinstance(template, dict):
            issues += pod_spec(template.get("spec"), "spec.template.spec")
            issues += [
                (f"spec.template.{path}", message) for path, message in metadata_labels(template.get("metadata") or {})
            ]
    elif rt.training_job is not None:
        issues += _training_templates(obj.get("spec"))
    if issues:
        raise errors.invalid(rt, str(meta.get("name") or ""), issues)


def _items(value: Any) -> list[tuple[int, dict[str, Any]]]:
    """The objects of a list field with their indexes (decoding let nulls through, as Go does; a
    training job's template has had only its schema checked when this runs)."""
    return [(i, v) for i, v in enumerate(value) if isinstance(v, dict)] if isinstance(value, list) else []


def _key(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def admit(rt: ResourceType, obj: Unstructured, field_validation: str) -> tuple[Unstructured, list[str]]:
    """Decode ``obj`` as its kind (400s; warnings for unknown fields); training jobs and other custom
    resources have their metadata decoded here and their spec admitted by ``admission``."""
    if rt.key in structure.MODELS:
        return structure.decode(rt, obj, field_validation)
    structure.decode_metadata(rt, obj)
    return obj, []


# A training job's templates are the CRD's business (types come from its schema, and a real API
# server accepts the rest, leaving its pods to fail): only the rules that keep a path inside its
# volume are applied to them at admission.
PATH_FIELDS = (".subPath", ".path", ".claimName")


def _training_templates(spec: Any) -> Issues:
    """The path rules for each replica's pod template."""
    issues: Issues = []
    if not isinstance(spec, dict):
        return issues
    for field, replicas in spec.items():
        if not field.endswith("ReplicaSpecs") or not isinstance(replicas, dict):
            continue
        for rtype, replica in replicas.items():
            template = replica.get("template") if isinstance(replica, dict) else None
            pod = template.get("spec") if isinstance(template, dict) else None
            if isinstance(pod, dict):
                issues += [
                    (path, message)
                    for path, message in pod_spec(pod, f"spec.{field}[{rtype}].template.spec")
                    if path.endswith(PATH_FIELDS)
                ]
    return issues


def metadata_labels(meta: dict[str, Any]) -> Issues:
    issues: Issues = []
    for key, value in (meta.get("labels") or {}).items():
        issues += qualified_name("metadata.labels", key)
        value = value or ""
        if len(value) > 63 or not re.fullmatch(LABEL_VALUE, value):
            issues.append(
                (
                    "metadata.labels",
                    f"Invalid value: {_q(value)}: a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric character, at most 63 "
                    f"characters (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                    f"'{LABEL_VALUE}')",
                )
            )
    return issues
