"""Recording core/v1 Events about objects, as controllers and the kubelet do (``kubectl describe``
lists them through ``involvedObject.*`` field selectors)."""

from __future__ import annotations

import secrets

from airflow_provider_training.embedded.resources import EVENTS
from airflow_provider_training.embedded.store import Store, now_timestamp
from airflow_provider_training.specs.refs import ObjectRef
from airflow_provider_training.specs.unstructured import Unstructured


def record_event(
    store: Store, involved: Unstructured, event_type: str, reason: str, message: str, component: str
) -> Unstructured:
    return store.create(EVENTS.key, new_event(involved, event_type, reason, message, component))


def record_events(store: Store, events: list[tuple[Unstructured, str, str, str, str]]) -> None:
    """Several events ``(involved, type, reason, message, component)`` in one store transaction, in
    order (one resourceVersion each): a controller's pass or a pod group's start records a burst,
    and one commit costs the event loop a fraction of one per event."""
    store.create_many(EVENTS.key, [new_event(*event) for event in events])


def new_event(involved: Unstructured, event_type: str, reason: str, message: str, component: str) -> Unstructured:
    """The Event object (not stored): for writing it in a transaction with other changes."""
    meta = involved.get("metadata", {})
    ref = ObjectRef.of(involved)
    namespace = ref.namespace or "default"
    now = now_timestamp()
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{ref.name}.{secrets.token_hex(8)}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion"),
            "kind": involved.get("kind"),
            "name": meta.get("name"),
            "namespace": ref.namespace,
            "uid": ref.uid,
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    return event
