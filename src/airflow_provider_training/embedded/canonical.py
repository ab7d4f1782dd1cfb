"""The form kube-apiserver stores built-in objects in: its defaults and canonical quantities.

One place, shared by the API server's admission (every create / update of a built-in type) and the
controllers (the pods they create), so a Pod reads the same however it was made. What is done is
what a real server does before it stores the object:

- **defaulting** (``k8s.io/kubernetes/pkg/apis/core/v1/defaults.go`` and ``batch/v1``): a Pod's
  ``dnsPolicy``, ``restartPolicy``, ``schedulerName``, ``enableServiceLinks``,
  ``terminationGracePeriodSeconds``, ``securityContext``; each container's
  ``terminationMessagePath`` / ``terminationMessagePolicy``, ``imagePullPolicy`` by the tag rule,
  port ``protocol``, probe timings, requests defaulted from limits; volume ``defaultMode``s; a
  Service's type, session affinity, port protocol and ``targetPort``; a Secret's ``type``; a
  Namespace's finalizer and ``kubernetes.io/metadata.name`` label;
- **admission plugins every cluster runs**: ``ServiceAccount`` (``serviceAccountName: default``),
  ``Priority`` (``priority: 0``, ``preemptionPolicy``), ``DefaultTolerationSeconds``;
- **canonical quantities** in every ResourceList the server stores (container / init container
  resources, pod ``overhead`` and ``resources``, ephemeral storage, emptyDir ``sizeLimit``, PVC
  requests, limits and capacity): ``1`` → ``"1"``, ``0.5`` → ``"500m"`` (``specs/quantity.py``);
- the Pod's ``status.qosClass``, computed from the resources as the server does.

Custom resources (training jobs, InferenceServices) keep what the user wrote, as on a cluster.
Functions change the object in place and return it; with ``problems`` given they collect the
(field path, value) of quantities that are not quantities instead of leaving them silently.
"""

from __future__ import annotations

import secrets
from typing import Any

from airflow_provider_training.embedded.serviceaccount import MOUNT_PATH, ROOT_CA_CONFIGMAP
from airflow_provider_training.specs.quantity import canonical_map
from airflow_provider_training.specs.unstructured import Unstructured

Problems = list[tuple[str, Any]]
DEFAULT_SERVICE_ACCOUNT = "default"
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
# Added by the DefaultTolerationSeconds admission plugin to every pod.
DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]
_COMPUTE = ("cpu", "memory")
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def image_pull_policy(image: str) -> str:
    """``Always`` for ``:latest`` or no tag, ``IfNotPresent`` otherwise (a digest counts as a tag)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _resources(owner: Unstructured, path: str, problems: Problems | None, default_requests: bool) -> None:
    res = owner.get("resources")
    if res is None:
        owner["resources"] = {}
        return
    if not isinstance(res, dict):
        return
    for field in ("limits", "requests"):
        if field in res:
            res[field] = canonical_map(res[field], f"{path}.resources.{field}", problems)
    limits = res.get("limits")
    if default_requests and isinstance(limits, dict) and limits:
        requests = res.setdefault("requests", {})
        if isinstance(requests, dict):
            for name, value in limits.items():
                requests.setdefault(name, value)


def _probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    for field, value in (
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ):
        probe.setdefault(field, value)
    http = probe.get("httpGet")
    if isinstance(http, dict):
        http.setdefault("path", "/")
        http.setdefault("scheme", "HTTP")


def _container(container: Any, path: str, problems: Problems | None) -> None:
    if not isinstance(container, dict):
        return
    container.setdefault("terminationMessagePath", TERMINATION_MESSAGE_PATH)
    container.setdefault("terminationMessagePolicy", "File")
    if isinstance(container.get("image"), str):
        container.setdefault("imagePullPolicy", image_pull_policy(container["image"]))
    _resources(container, path, problems, default_requests=True)
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for probe in _PROBES:
        _probe(container.get(probe))
    for i, var in enumerate(container.get("env") or []):
        source = var.get("valueFrom") if isinstance(var, dict) else None
        if isinstance(source, dict):
            _field_ref(source.get("fieldRef"))
            _resource_field_ref(source.get("resourceFieldRef"), f"{path}.env[{i}].valueFrom", problems)


def _field_ref(ref: Any) -> None:
    if isinstance(ref, dict):
        ref.setdefault("apiVersion", "v1")


def _resource_field_ref(ref: Any, path: str, problems: Problems | None) -> None:
    if isinstance(ref, dict) and "divisor" in ref:
        ref["divisor"] = canonical_map({"divisor": ref["divisor"]}, f"{path}.resourceFieldRef", problems)["divisor"]


def _downward_items(items: Any, path: str, problems: Problems | None) -> None:
    for i, item in enumerate(items or []):
        if isinstance(item, dict):
            _field_ref(item.get("fieldRef"))
            _resource_field_ref(item.get("resourceFieldRef"), f"{path}.items[{i}]", problems)


def _volume(volume: Any, path: str, problems: Problems | None) -> None:
    if not isinstance(volume, dict):
        return
    sources = set(volume) - {"name"}
    if not sources:
        volume["emptyDir"] = {}
    for source in ("configMap", "secret", "downwardAPI", "projected"):
        if isinstance(volume.get(source), dict):
            volume[source].setdefault("defaultMode", 420)
    if isinstance(volume.get("downwardAPI"), dict):
        _downward_items(volume["downwardAPI"].get("items"), f"{path}.downwardAPI", problems)
    if isinstance(volume.get("projected"), dict):
        for j, projection in enumerate(volume["projected"].get("sources") or []):
            if isinstance(projection, dict) and isinstance(projection.get("downwardAPI"), dict):
                _downward_items(
                    projection["downwardAPI"].get("items"), f"{path}.projected.sources[{j}].downwardAPI", problems
                )
    if isinstance(volume.get("hostPath"), dict):
        volume["hostPath"].setdefault("type", "")
    empty = volume.get("emptyDir")
    if isinstance(empty, dict) and "sizeLimit" in empty:
        empty["sizeLimit"] = canonical_map({"sizeLimit": empty["sizeLimit"]}, f"{path}.emptyDir", problems)["sizeLimit"]
    ephemeral = ((volume.get("ephemeral") or {}).get("volumeClaimTemplate") or {}).get("spec")
    if isinstance(ephemeral, dict):
        _resources(ephemeral, f"{path}.ephemeral.volumeClaimTemplate.spec", problems, default_requests=False)


def pod_spec(spec: Any, path: str = "spec", problems: Problems | None = None) -> Any:
    """Defaults and canonical quantities of a PodSpec (a Pod's or a template's)."""
    if not isinstance(spec, dict):
        return spec
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    if spec.get("serviceAccount") and not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    spec.setdefault("serviceAccountName", DEFAULT_SERVICE_ACCOUNT)
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    if not spec.get("priorityClassName"):
        spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(spec.get(kind) or []):
            _container(container, f"{path}.{kind}[{i}]", problems)
    for i, volume in enumerate(spec.get("volumes") or []):
        _volume(volume, f"{path}.volumes[{i}]", problems)
    if "overhead" in spec:
        spec["overhead"] = canonical_map(spec["overhead"], f"{path}.overhead", problems)
    if isinstance(spec.get("resources"), dict):
        _resources(spec, path, problems, default_requests=False)
    return spec


def service_account_volume(spec: dict[str, Any], automount: bool = True) -> None:
    """What the ServiceAccount admission plugin adds to a new pod: the projected
    ``kube-api-access-xxxxx`` volume (token, ``ca.crt``, ``namespace``) mounted read-only at
    ``/var/run/secrets/kubernetes.io/serviceaccount`` in every container, unless the pod says
    ``automountServiceAccountToken: false`` or mounts something there itself."""
    if spec.get("automountServiceAccountToken") is False or not automount:
        return  # (``automount``: what the service account says, when the pod says nothing)
    volumes = spec.get("volumes") or []
    if not isinstance(volumes, list) or any(
        isinstance(v, dict) and str(v.get("name", "")).startswith("kube-api-access-") for v in volumes
    ):
        return
    name = "kube-api-access-" + "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
    containers = [c for k in ("initContainers", "containers") for c in spec.get(k) or [] if isinstance(c, dict)]
    mounted = False
    for container in containers:
        mounts = container.setdefault("volumeMounts", [])
        if isinstance(mounts, list) and not any(
            isinstance(m, dict) and m.get("mountPath") == MOUNT_PATH for m in mounts
        ):
            mounts.append({"name": name, "mountPath": MOUNT_PATH, "readOnly": True})
            mounted = True
    if not mounted:
        return
    ca = {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    namespace = {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}]}
    sources = [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}, {"configMap": ca}]
    spec["volumes"] = [
        *volumes,
        {"name": name, "projected": {"defaultMode": 420, "sources": [*sources, {"downwardAPI": namespace}]}},
    ]


def qos_class(spec: dict[str, Any]) -> str:
    """Guaranteed / Burstable / BestEffort, from cpu and memory of every container (as the server)."""
    containers = [c for k in ("initContainers", "containers") for c in spec.get(k) or [] if isinstance(c, dict)]
    any_set, guaranteed = False, True
    for container in containers:
        res = container.get("resources") or {}
        requests = {k: v for k, v in (res.get("requests") or {}).items() if k in _COMPUTE}
        limits = {k: v for k, v in (res.get("limits") or {}).items() if k in _COMPUTE}
        any_set = any_set or bool(requests) or bool(limits)
        if set(limits) != set(_COMPUTE) or any(requests.get(k, limits[k]) != limits[k] for k in _COMPUTE):
            guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def pod(
    obj: Unstructured, problems: Problems | None = None, *, new: bool = True, automount: bool = True
) -> Unstructured:
    """A Pod as the server stores it. ``new``: also the admission defaults of a create (tolerations)
    and the initial status ``{"phase": "Pending", "qosClass": …}`` when the pod has none."""
    spec = obj.setdefault("spec", {})
    pod_spec(spec, "spec", problems)
    if new and isinstance(spec, dict):
        service_account_volume(spec, automount)
        tolerations = spec.setdefault("tolerations", [])
        if isinstance(tolerations, list):
            present = {(t.get("key"), t.get("effect")) for t in tolerations if isinstance(t, dict)}
            for toleration in DEFAULT_TOLERATIONS:
                if (toleration["key"], toleration["effect"]) not in present:
                    tolerations.append(dict(toleration))
    status = obj.get("status")
    if not isinstance(status, dict) or not status:
        obj["status"] = {"phase": "Pending"}
    if isinstance(spec, dict):
        obj["status"]["qosClass"] = qos_class(spec)
    return obj


def _template(obj: Unstructured, path: str, problems: Problems | None) -> None:
    template = obj.get("spec", {}).get("template") if isinstance(obj.get("spec"), dict) else None
    if isinstance(template, dict):
        pod_spec(template.setdefault("spec", {}), f"{path}.template.spec", problems)


def service(obj: Unstructured) -> Unstructured:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return obj
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    if spec.get("type") != "ExternalName":
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    if spec.get("clusterIP") and "clusterIPs" not in spec:
        spec["clusterIPs"] = [spec["clusterIP"]]
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            if "port" in port:
                port.setdefault("targetPort", port["port"])
    obj.setdefault("status", {"loadBalancer": {}})
    return obj


def claim(obj: Unstructured, problems: Problems | None = None) -> Unstructured:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("volumeMode", "Filesystem")
        _resources(spec, "spec", problems, default_requests=False)
        if spec.get("resources") == {}:
            del spec["resources"]
    status = obj.get("status")
    if isinstance(status, dict) and "capacity" in status:
        status["capacity"] = canonical_map(status["capacity"], "status.capacity", problems)
    return obj


def namespace(obj: Unstructured) -> Unstructured:
    meta = obj.setdefault("metadata", {})
    if meta.get("name"):
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.setdefault("finalizers", ["kubernetes"])
    return obj


def canonicalize(
    resource: str, obj: Unstructured, problems: Problems | None = None, *, new: bool = True, automount: bool = True
) -> Any:
    """``obj`` (of store resource ``resource``, e.g. ``core/pods``) in the server's stored form."""
    if not isinstance(obj, dict):
        return obj
    if resource == "core/pods":
        return pod(obj, problems, new=new, automount=automount)
    if resource == "core/services":
        return service(obj)
    if resource == "core/persistentvolumeclaims":
        return claim(obj, problems)
    if resource == "core/namespaces":
        return namespace(obj)
    if resource == "core/secrets":
        if not obj.get("type"):
            obj["type"] = "Opaque"
    elif resource == "batch/jobs":
        _template(obj, "spec", problems)
    return obj
