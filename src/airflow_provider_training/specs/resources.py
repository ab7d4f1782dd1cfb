"""The one table of REST resource types: what the embedded API server serves (with what discovery
says about each) and what the clients address (``client.resources`` is a view of it by kind)."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_training.specs.kinds import ALL_KINDS, GROUP, VERSION, KindInfo
from airflow_provider_training.specs.trainer.crds import ALL_TRAINER_KINDS, TrainerKind

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
READ_VERBS = ("get", "list", "watch")
CREATE_ONLY = ("create",)
# The verbs discovery lists for a subresource (anything else: a status subresource).
SUBRESOURCE_VERBS = {"log": ("get",), "token": ("create",), "exec": ("create", "get")}
METADATA_FIELDS = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool = True
    verbs: tuple[str, ...] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    # Field selectors beyond metadata.name / metadata.namespace; "involvedObject.*" allows any child.
    field_selectors: tuple[str, ...] = ()
    training_job: KindInfo | None = None
    # Kubeflow Trainer v2 / JobSet kinds (served from their vendored CRDs, admitted by frameworks.trainer).
    trainer: TrainerKind | None = None
    # False for the review kinds (SelfSubjectAccessReview, …): created, answered, never stored.
    stored: bool = True

    @property
    def key(self) -> str:
        """The store's name for this resource."""
        return f"{self.group or 'core'}/{self.plural}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def read_only(self) -> bool:
        return "create" not in self.verbs

    @property
    def qualified_name(self) -> str:
        """``pytorchjobs.kubeflow.org`` as it appears in error messages (core: ``pods``)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str, name: str | None = None) -> str:
        """The REST path of the collection in ``namespace`` (or of the object ``name``)."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        base = f"{prefix}/namespaces/{namespace}/{self.plural}" if self.namespaced else f"{prefix}/{self.plural}"
        return f"{base}/{name}" if name else base

    def allows_field(self, field: str) -> bool:
        if field in METADATA_FIELDS or field in self.field_selectors:
            return True
        return any(f.endswith(".*") and field.startswith(f[:-1]) for f in self.field_selectors)


_CORE = [
    ResourceType(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        subresources=("status",),
        field_selectors=("status.phase",),
    ),
    ResourceType(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        short_names=("po",),
        categories=("all",),
        subresources=("status", "log"),
        field_selectors=("status.phase", "spec.nodeName", "spec.restartPolicy", "status.podIP"),
    ),
    ResourceType(
        "",
        "v1",
        "services",
        "service",
        "Service",
        short_names=("svc",),
        categories=("all",),
        subresources=("status",),
    ),
    ResourceType(
        "",
        "v1",
        "events",
        "event",
        "Event",
        short_names=("ev",),
        field_selectors=("involvedObject.*", "reason", "type", "source", "reportingComponent"),
    ),
    ResourceType("", "v1", "configmaps", "configmap", "ConfigMap", short_names=("cm",)),
    ResourceType("", "v1", "secrets", "secret", "Secret", field_selectors=("type",)),
    ResourceType(
        "", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", short_names=("sa",), subresources=("token",)
    ),
    ResourceType(
        "",
        "v1",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        short_names=("pvc",),
        subresources=("status",),
    ),
]
_RBAC_GROUP = "rbac.authorization.k8s.io"
_AUTHORIZATION = "authorization.k8s.io"
_AUTHENTICATION = "authentication.k8s.io"
_RBAC = [
    ResourceType(_RBAC_GROUP, "v1", "roles", "role", "Role"),
    ResourceType(_RBAC_GROUP, "v1", "clusterroles", "clusterrole", "ClusterRole", namespaced=False),
    ResourceType(_RBAC_GROUP, "v1", "rolebindings", "rolebinding", "RoleBinding"),
    ResourceType(
        _RBAC_GROUP, "v1", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", namespaced=False
    ),
]
_REVIEWS = [
    ResourceType(
        _AUTHORIZATION,
        "v1",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        namespaced=False,
        verbs=CREATE_ONLY,
        stored=False,
    ),
    ResourceType(
        _AUTHORIZATION,
        "v1",
        "subjectaccessreviews",
        "subjectaccessreview",
        "SubjectAccessReview",
        namespaced=False,
        verbs=CREATE_ONLY,
        stored=False,
    ),
    ResourceType(
        _AUTHORIZATION,
        "v1",
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        "LocalSubjectAccessReview",
        verbs=CREATE_ONLY,
        stored=False,
    ),
    ResourceType(
        _AUTHORIZATION,
        "v1",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        "SelfSubjectRulesReview",
        namespaced=False,
        verbs=CREATE_ONLY,
        stored=False,
    ),
    ResourceType(
        _AUTHENTICATION,
        "v1",
        "selfsubjectreviews",
        "selfsubjectreview",
        "SelfSubjectReview",
        namespaced=False,
        verbs=CREATE_ONLY,
        stored=False,
    ),
    ResourceType(
        _AUTHENTICATION,
        "v1",
        "tokenreviews",
        "tokenreview",
        "TokenReview",
        namespaced=False,
        verbs=CREATE_ONLY,
        stored=False,
    ),
]
_OTHER = [
    ResourceType(
        "batch",
        "v1",
        "jobs",
        "job",
        "Job",
        categories=("all",),
        subresources=("status",),
        field_selectors=("status.successful",),
    ),
    ResourceType(
        "serving.kserve.io",
        "v1beta1",
        "inferenceservices",
        "inferenceservice",
        "InferenceService",
        short_names=("isvc",),
        categories=("kserve",),
        subresources=("status",),
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        namespaced=False,
        verbs=READ_VERBS,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
    ),
]


def _training(info: KindInfo) -> ResourceType:
    # The upstream CRDs declare no shortNames or categories; kubectl finds them by singular name.
    return ResourceType(
        GROUP, VERSION, info.plural, info.singular, info.kind, subresources=("status",), training_job=info
    )


def _trainer(info: TrainerKind) -> ResourceType:
    group, version = info.api_version.split("/")
    # TrainJob and JobSet have a status subresource; the runtimes have none (their CRDs say so).
    subresources = ("status",) if info.plural in ("trainjobs", "jobsets") else ()
    return ResourceType(
        group,
        version,
        info.plural,
        info.plural[:-1],
        info.kind,
        namespaced=info.namespaced,
        subresources=subresources,
        trainer=info,
    )


RESOURCE_TYPES: tuple[ResourceType, ...] = (
    *_CORE,
    *_OTHER,
    *_RBAC,
    *_REVIEWS,
    *(_training(i) for i in ALL_KINDS),
    *(_trainer(i) for i in ALL_TRAINER_KINDS),
)
BY_PATH: dict[tuple[str, str, str], ResourceType] = {(r.group, r.version, r.plural): r for r in RESOURCE_TYPES}
BY_KEY: dict[str, ResourceType] = {r.key: r for r in RESOURCE_TYPES}
BY_KIND: dict[str, ResourceType] = {r.kind: r for r in RESOURCE_TYPES}
GROUP_VERSIONS: dict[str, list[str]] = {}
for _r in RESOURCE_TYPES:
    if _r.group and _r.version not in GROUP_VERSIONS.setdefault(_r.group, []):
        GROUP_VERSIONS[_r.group].append(_r.version)

NAMESPACES = BY_KEY["core/namespaces"]
PODS = BY_KEY["core/pods"]
EVENTS = BY_KEY["core/events"]
PVCS = BY_KEY["core/persistentvolumeclaims"]
CRDS = BY_KEY["apiextensions.k8s.io/customresourcedefinitions"]
SERVICE_ACCOUNTS = BY_KEY["core/serviceaccounts"]
ROLES = BY_KEY[f"{_RBAC_GROUP}/roles"]
CLUSTER_ROLES = BY_KEY[f"{_RBAC_GROUP}/clusterroles"]
ROLE_BINDINGS = BY_KEY[f"{_RBAC_GROUP}/rolebindings"]
CLUSTER_ROLE_BINDINGS = BY_KEY[f"{_RBAC_GROUP}/clusterrolebindings"]
RBAC_TYPES = (ROLES, CLUSTER_ROLES, ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS)
# Namespaces that exist on a fresh control plane, as on a cluster with the Training Operator.
INITIAL_NAMESPACES = ("default", "kube-system", "kubeflow")


def resources_in(group: str, version: str) -> list[ResourceType]:
    return [r for r in RESOURCE_TYPES if r.group == group and r.version == version]
