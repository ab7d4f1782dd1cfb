"""API objects as JSON, and their metadata read through typed accessors.

``Unstructured`` is what client-go calls an object held as its JSON map (``unstructured.Unstructured``):
the controllers, the store and the node agent pass objects this way, since they serve every kind
and keep fields they do not interpret verbatim. What every kind shares — ``metadata``, its
``ownerReferences`` — has a fixed shape, given here as TypedDicts and read with the getters
client-go puts on ``Unstructured`` (``meta``, ``owner_references``, ``controller_of``…), so no
caller hand-reads ``obj["metadata"]["ownerReferences"]`` or decides on its own how defensive to be.

Objects written around the API (an older daemon's store, a buggy client) can hold malformed
references; the getters skip what is not an object instead of raising, so one such object never
stops a controller's watch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypedDict, cast

if TYPE_CHECKING:
    from airflow_provider_training.specs.meta import ObjectMeta as TypedObjectMeta

Unstructured = dict[str, Any]  # an API object (apiVersion, kind, metadata, spec, status...) as JSON


class OwnerReference(TypedDict):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: NotRequired[bool]
    blockOwnerDeletion: NotRequired[bool]


class ObjectMeta(TypedDict, total=False):
    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    deletionGracePeriodSeconds: int
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]
    ownerReferences: list[OwnerReference]
    managedFields: list[Unstructured]


class Kind(Protocol):
    """What names a kind: ``specs.resources.ResourceType``, ``specs.kinds.KindInfo``, ``TrainerKind``."""

    @property
    def api_version(self) -> str: ...

    @property
    def kind(self) -> str: ...


class Typed(Protocol):
    """A typed API object (``specs.jobs.TrainingJob``, ``specs.trainer.models.TrainJob``)."""

    @property
    def api_version(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def metadata(self) -> TypedObjectMeta: ...


def meta(obj: Mapping[str, Any]) -> ObjectMeta:
    """The object's metadata (empty when it has none, or none that is an object)."""
    found = obj.get("metadata")
    return cast(ObjectMeta, found) if isinstance(found, dict) else {}


def owner_references(obj: Any) -> list[OwnerReference]:
    """The object's ownerReferences that are objects; anything else is ignored."""
    refs = meta(obj).get("ownerReferences") if isinstance(obj, Mapping) else None
    return [r for r in refs if isinstance(r, dict)] if isinstance(refs, list) else []


def controller_of(obj: Any) -> OwnerReference | None:
    """The object's controlling ownerReference (``controller: true``), if it has one."""
    return next((r for r in owner_references(obj) if r.get("controller")), None)


def controlled_by(obj: Any, owner_uid: str | None) -> bool:
    """Whether the object's controlling ownerReference names ``owner_uid``."""
    ref = controller_of(obj)
    return ref is not None and bool(owner_uid) and ref.get("uid") == owner_uid


def controller_ref(owner: Mapping[str, Any] | Typed, kind: Kind | None = None) -> OwnerReference:
    """The controlling ownerReference of what a controller creates for ``owner``, as the upstream
    controllers write it (``metav1.NewControllerRef``: ``controller`` and ``blockOwnerDeletion``
    true). ``kind`` names the owner's kind where the controller knows it (upstream passes it too);
    without it, the owner's own ``apiVersion`` and ``kind``."""
    if isinstance(owner, Mapping):
        m = meta(owner)
        api_version, kind_name = owner.get("apiVersion", ""), owner.get("kind", "")
        name, uid = m.get("name", ""), m.get("uid", "")
    else:
        api_version, kind_name = owner.api_version, owner.kind
        name, uid = owner.metadata.name or "", owner.metadata.uid or ""
    if kind is not None:
        api_version, kind_name = kind.api_version, kind.kind
    return {
        "apiVersion": api_version,
        "kind": kind_name,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
