"""Request bodies in ``application/vnd.kubernetes.protobuf``, as kubectl sends them.

kubectl's typed commands (``create secret``, ``create configmap``, ``create namespace``, ``create service``) always
encode the object in protobuf — client-go does not negotiate the request's content type and has
no fallback to JSON on a 415 — so not advertising protobuf would not help: the server has to read
it, as kube-apiserver does. The body is the ``k8s\\0`` magic, then a ``runtime.Unknown`` envelope
(``typeMeta``, ``raw``) whose ``raw`` is the object's own message.

The messages are declared here (field numbers of ``k8s.io/api/core/v1/generated.proto`` and
``apimachinery/.../meta/v1/generated.proto``) for the kinds kubectl creates that this server
stores, and decoded with the ``protobuf`` runtime into the same dict a JSON body gives (bytes as
base64, as in JSON). Other kinds get a 415 that says what to do instead.
"""

from __future__ import annotations

import functools
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message, message_factory

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
_PACKAGE = "embedded.k8s"
_STRING, _BYTES, _INT64, _BOOL = "string", "bytes", "int64", "bool"

# message -> [(number, json name, type, repeated)]; a type "map:<value type>" is map<string, value>.
_MESSAGES: dict[str, list[tuple[int, str, str, bool]]] = {
    "TypeMeta": [(1, "apiVersion", _STRING, False), (2, "kind", _STRING, False)],
    "Unknown": [
        (1, "typeMeta", "TypeMeta", False),
        (2, "raw", _BYTES, False),
        (3, "contentEncoding", _STRING, False),
        (4, "contentType", _STRING, False),
    ],
    "OwnerReference": [
        (1, "kind", _STRING, False),
        (3, "name", _STRING, False),
        (4, "uid", _STRING, False),
        (5, "apiVersion", _STRING, False),
        (6, "controller", _BOOL, False),
        (7, "blockOwnerDeletion", _BOOL, False),
    ],
    "ObjectMeta": [
        (1, "name", _STRING, False),
        (2, "generateName", _STRING, False),
        (3, "namespace", _STRING, False),
        (5, "uid", _STRING, False),
        (6, "resourceVersion", _STRING, False),
        (7, "generation", _INT64, False),
        (11, "labels", "map:string", False),
        (12, "annotations", "map:string", False),
        (13, "ownerReferences", "OwnerReference", True),
        (14, "finalizers", _STRING, True),
    ],
    "Secret": [
        (1, "metadata", "ObjectMeta", False),
        (2, "data", "map:bytes", False),
        (3, "type", _STRING, False),
        (4, "stringData", "map:string", False),
        (5, "immutable", _BOOL, False),
    ],
    "ConfigMap": [
        (1, "metadata", "ObjectMeta", False),
        (2, "data", "map:string", False),
        (3, "binaryData", "map:bytes", False),
        (4, "immutable", _BOOL, False),
    ],
    # IntOrString: type 0 = intVal, 1 = strVal (turned into a plain int or string below)
    "IntOrString": [(1, "type", _INT64, False), (2, "intVal", _INT64, False), (3, "strVal", _STRING, False)],
    "ServicePort": [
        (1, "name", _STRING, False),
        (2, "protocol", _STRING, False),
        (3, "port", _INT64, False),
        (4, "targetPort", "IntOrString", False),
        (5, "nodePort", _INT64, False),
    ],
    "ServiceSpec": [
        (1, "ports", "ServicePort", True),
        (2, "selector", "map:string", False),
        (3, "clusterIP", _STRING, False),
        (4, "type", _STRING, False),
        (7, "sessionAffinity", _STRING, False),
        (8, "loadBalancerIP", _STRING, False),
        (10, "externalName", _STRING, False),
        (11, "externalTrafficPolicy", _STRING, False),
        (12, "healthCheckNodePort", _INT64, False),
        (13, "publishNotReadyAddresses", _BOOL, False),
    ],
    "Service": [(1, "metadata", "ObjectMeta", False), (2, "spec", "ServiceSpec", False)],
    "NamespaceSpec": [(1, "finalizers", _STRING, True)],
    "Namespace": [(1, "metadata", "ObjectMeta", False), (2, "spec", "NamespaceSpec", False)],
    # core/v1 ServiceAccount (kubectl create serviceaccount)
    "ObjectReference": [
        (1, "kind", _STRING, False),
        (2, "namespace", _STRING, False),
        (3, "name", _STRING, False),
        (4, "uid", _STRING, False),
        (5, "apiVersion", _STRING, False),
        (6, "resourceVersion", _STRING, False),
        (7, "fieldPath", _STRING, False),
    ],
    "LocalObjectReference": [(1, "name", _STRING, False)],
    "ServiceAccount": [
        (1, "metadata", "ObjectMeta", False),
        (2, "secrets", "ObjectReference", True),
        (3, "imagePullSecrets", "LocalObjectReference", True),
        (4, "automountServiceAccountToken", _BOOL, False),
    ],
    # rbac.authorization.k8s.io/v1 (kubectl create role / clusterrole / rolebinding / clusterrolebinding)
    "LabelSelectorRequirement": [
        (1, "key", _STRING, False),
        (2, "operator", _STRING, False),
        (3, "values", _STRING, True),
    ],
    "LabelSelector": [
        (1, "matchLabels", "map:string", False),
        (2, "matchExpressions", "LabelSelectorRequirement", True),
    ],
    "PolicyRule": [
        (1, "verbs", _STRING, True),
        (2, "apiGroups", _STRING, True),
        (3, "resources", _STRING, True),
        (4, "resourceNames", _STRING, True),
        (5, "nonResourceURLs", _STRING, True),
    ],
    "AggregationRule": [(1, "clusterRoleSelectors", "LabelSelector", True)],
    "Role": [(1, "metadata", "ObjectMeta", False), (2, "rules", "PolicyRule", True)],
    "ClusterRole": [
        (1, "metadata", "ObjectMeta", False),
        (2, "rules", "PolicyRule", True),
        (3, "aggregationRule", "AggregationRule", False),
    ],
    "Subject": [
        (1, "kind", _STRING, False),
        (2, "apiGroup", _STRING, False),
        (3, "name", _STRING, False),
        (4, "namespace", _STRING, False),
    ],
    "RoleRef": [(1, "apiGroup", _STRING, False), (2, "kind", _STRING, False), (3, "name", _STRING, False)],
    "RoleBinding": [
        (1, "metadata", "ObjectMeta", False),
        (2, "subjects", "Subject", True),
        (3, "roleRef", "RoleRef", False),
    ],
    "ClusterRoleBinding": [
        (1, "metadata", "ObjectMeta", False),
        (2, "subjects", "Subject", True),
        (3, "roleRef", "RoleRef", False),
    ],
    # authorization.k8s.io/v1 (kubectl auth can-i [--list])
    "FieldSelectorRequirement": [
        (1, "key", _STRING, False),
        (2, "operator", _STRING, False),
        (3, "values", _STRING, True),
    ],
    "FieldSelectorAttributes": [
        (1, "rawSelector", _STRING, False),
        (2, "requirements", "FieldSelectorRequirement", True),
    ],
    "LabelSelectorAttributes": [
        (1, "rawSelector", _STRING, False),
        (2, "requirements", "LabelSelectorRequirement", True),
    ],
    "ResourceAttributes": [
        (1, "namespace", _STRING, False),
        (2, "verb", _STRING, False),
        (3, "group", _STRING, False),
        (4, "version", _STRING, False),
        (5, "resource", _STRING, False),
        (6, "subresource", _STRING, False),
        (7, "name", _STRING, False),
        (8, "fieldSelector", "FieldSelectorAttributes", False),
        (9, "labelSelector", "LabelSelectorAttributes", False),
    ],
    "NonResourceAttributes": [(1, "path", _STRING, False), (2, "verb", _STRING, False)],
    "ExtraValue": [(1, "items", _STRING, True)],
    "SelfSubjectAccessReviewSpec": [
        (1, "resourceAttributes", "ResourceAttributes", False),
        (2, "nonResourceAttributes", "NonResourceAttributes", False),
    ],
    "SubjectAccessReviewSpec": [
        (1, "resourceAttributes", "ResourceAttributes", False),
        (2, "nonResourceAttributes", "NonResourceAttributes", False),
        (3, "user", _STRING, False),
        (4, "groups", _STRING, True),
        (5, "extra", "map:ExtraValue", False),
        (6, "uid", _STRING, False),
    ],
    "SelfSubjectAccessReview": [
        (1, "metadata", "ObjectMeta", False),
        (2, "spec", "SelfSubjectAccessReviewSpec", False),
    ],
    "SubjectAccessReview": [(1, "metadata", "ObjectMeta", False), (2, "spec", "SubjectAccessReviewSpec", False)],
    "LocalSubjectAccessReview": [(1, "metadata", "ObjectMeta", False), (2, "spec", "SubjectAccessReviewSpec", False)],
    "SelfSubjectRulesReviewSpec": [(1, "namespace", _STRING, False)],
    "SelfSubjectRulesReview": [(1, "metadata", "ObjectMeta", False), (2, "spec", "SelfSubjectRulesReviewSpec", False)],
    # authentication.k8s.io/v1 (kubectl auth whoami, kubectl create token)
    "SelfSubjectReview": [(1, "metadata", "ObjectMeta", False)],
    "BoundObjectReference": [
        (1, "kind", _STRING, False),
        (2, "apiVersion", _STRING, False),
        (3, "name", _STRING, False),
        (4, "uid", _STRING, False),
    ],
    "TokenRequestSpec": [
        (1, "audiences", _STRING, True),
        (3, "boundObjectRef", "BoundObjectReference", False),
        (4, "expirationSeconds", _INT64, False),
    ],
    "TokenRequest": [(1, "metadata", "ObjectMeta", False), (2, "spec", "TokenRequestSpec", False)],
    "TokenReviewSpec": [(1, "token", _STRING, False), (2, "audiences", _STRING, True)],
    "TokenReview": [(1, "metadata", "ObjectMeta", False), (2, "spec", "TokenReviewSpec", False)],
}
_SCALARS = {
    _STRING: descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    _BYTES: descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    _INT64: descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    _BOOL: descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
}
# apiVersion -> the kinds of it that kubectl's typed commands send and this server decodes
DECODABLE = {
    "v1": ("Secret", "ConfigMap", "Namespace", "Service", "ServiceAccount"),
    "rbac.authorization.k8s.io/v1": ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"),
    "authorization.k8s.io/v1": (
        "SelfSubjectAccessReview",
        "SubjectAccessReview",
        "LocalSubjectAccessReview",
        "SelfSubjectRulesReview",
    ),
    "authentication.k8s.io/v1": ("SelfSubjectReview", "TokenRequest", "TokenReview"),
}
# *bool in Go: written only when set, so false is meant
_POINTER_BOOLS = ("immutable", "automountServiceAccountToken")
# their empty values are data
_USER_MAPS = ("data", "stringData", "binaryData", "labels", "annotations", "matchLabels", "extra")


class ProtobufError(ValueError):
    pass


def _field(parent: descriptor_pb2.DescriptorProto, number: int, name: str, type_: str, repeated: bool) -> None:
    field = parent.field.add(name=name, number=number, json_name=name)
    field.label = (
        descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
        if repeated
        else descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    )
    if type_.startswith("map:"):
        entry = parent.nested_type.add(name=f"{name[0].upper()}{name[1:]}Entry")
        entry.options.map_entry = True
        _field(entry, 1, "key", _STRING, False)
        _field(entry, 2, "value", type_[4:], False)
        field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{parent.name}.{entry.name}"
    elif type_ in _SCALARS:
        field.type = _SCALARS[type_]
    else:
        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{type_}"


@functools.cache
def _classes() -> dict[str, type[message.Message]]:
    proto = descriptor_pb2.FileDescriptorProto(name="embedded_k8s.proto", package=_PACKAGE, syntax="proto2")
    for name, fields in _MESSAGES.items():
        described = proto.message_type.add(name=name)
        for number, field_name, type_, repeated in fields:
            _field(described, number, field_name, type_, repeated)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")) for name in _MESSAGES
    }


def decode(raw: bytes) -> dict[str, Any]:
    """The object in a protobuf request body, as the dict its JSON form would give."""
    if not raw.startswith(MAGIC):
        raise ProtobufError("the protobuf body does not start with the Kubernetes magic number (k8s\\0)")
    classes = _classes()
    try:
        envelope = classes["Unknown"].FromString(raw[len(MAGIC) :])
    except message.DecodeError as exc:
        raise ProtobufError(f"the protobuf envelope cannot be decoded: {exc}") from None
    kind, api_version = envelope.typeMeta.kind, envelope.typeMeta.apiVersion
    if kind not in DECODABLE.get(api_version, ()):
        raise ProtobufError(
            f"{kind or 'this object'} ({api_version}) sent as protobuf is not decoded by the embedded control plane "
            "(only what kubectl's typed commands send: Secret, ConfigMap, Namespace, Service, ServiceAccount, the "
            "RBAC kinds, access reviews, TokenRequest): send it as JSON or YAML, e.g. "
            "kubectl create … --dry-run=client -o yaml | kubectl apply -f -"
        )
    try:
        obj = classes[kind].FromString(envelope.raw)
    except message.DecodeError as exc:
        raise ProtobufError(f"the {kind} in the protobuf body cannot be decoded: {exc}") from None
    bad = _invalid_utf8(obj, "")
    if bad:
        # upb hands proto2 strings that are not UTF-8 back as bytes; JSON (and the store) cannot hold them
        version = api_version.rpartition("/")[2]
        raise ProtobufError(
            f'{kind} in version "{version}" cannot be handled as a {kind}: proto: field {bad} contains invalid UTF-8; '
            "send text as UTF-8 (binary values belong in a Secret's data or a ConfigMap's binaryData)"
        )
    out: dict[str, Any] = _omit_empty(json_format.MessageToDict(obj, preserving_proto_field_name=True))
    generation = out.get("metadata", {}).get("generation")
    if generation is not None:
        out["metadata"]["generation"] = int(generation)  # int64 is a string in proto3's JSON mapping
    for port in (out.get("spec") or {}).get("ports") or []:
        for field in ("port", "nodePort"):
            if field in port:
                port[field] = int(port[field])
        target = port.get("targetPort")
        if isinstance(target, dict):
            string = int(target.get("type", 0)) == 1
            port["targetPort"] = target.get("strVal", "") if string else int(target.get("intVal", 0))
    spec = out.get("spec") or {}
    for field in ("healthCheckNodePort", "expirationSeconds"):
        if field in spec:
            spec[field] = int(spec[field])
    if isinstance(spec.get("extra"), dict):  # ExtraValue is a list of strings in JSON
        spec["extra"] = {k: list((v or {}).get("items") or []) for k, v in spec["extra"].items()}
    return {"kind": kind, "apiVersion": api_version, **out}


def _invalid_utf8(msg: message.Message, path: str) -> str:
    """The JSON path of the first string field or map key that is not valid UTF-8, or ""."""
    for field, value in msg.ListFields():
        name = f"{path}.{field.json_name}" if path else field.json_name
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            value_field = entry.fields_by_name["value"]
            try:
                pairs = list(value.items())
            except UnicodeDecodeError:  # a map key that is not UTF-8 (upb decodes keys as it lists them)
                return name
            for key, item in pairs:
                if isinstance(key, bytes):
                    return name
                if value_field.type == value_field.TYPE_STRING and isinstance(item, bytes):
                    return f"{name}[{key}]"
                if value_field.message_type is not None and (found := _invalid_utf8(item, f"{name}[{key}]")):
                    return found
            continue
        items = list(value) if field.is_repeated else [value]
        for i, item in enumerate(items):
            where = f"{name}[{i}]" if field.is_repeated else name
            if field.type == field.TYPE_STRING and isinstance(item, bytes):
                return where
            if field.message_type is not None and (found := _invalid_utf8(item, where)):
                return found
    return ""


def _omit_empty(value: Any) -> Any:
    """Go writes every non-pointer string field, empty ones too (``generateName: ""``); its JSON
    form omits them (``omitempty``), and so does the object stored from it."""
    if isinstance(value, dict):
        return {
            k: v if k in _USER_MAPS else _omit_empty(v)
            for k, v in value.items()
            if k in _USER_MAPS or (v not in ("", "0") and (v is not False or k in _POINTER_BOOLS))
        }
    if isinstance(value, list):
        return [_omit_empty(v) for v in value]
    return value
