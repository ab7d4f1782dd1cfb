"""Recording core/v1 Events about objects, as controllers and the kubelet do (``kubectl describe``
lists them through ``involvedObject.*`` field selectors).

As client-go's event recorder (``EventSourceObjectSpamFilter``), each source may record a burst of
25 events about one object, then one per 5 minutes: a 1,000-pod job's controller records 25
``Created pod`` events, not a thousand written in one go."""

from __future__ import annotations

import collections
import secrets
import threading
import time

from airflow_provider_training.embedded.resources import EVENTS
from airflow_provider_training.embedded.store import Store, now_timestamp
from airflow_provider_training.specs.refs import ObjectRef
from airflow_provider_training.specs.unstructured import Unstructured

SPAM_BURST = 25  # client-go's defaultSpamBurst
SPAM_REFILL_SECONDS = 300.0  # one token per 5 minutes (defaultSpamQPS = 1/300)
SPAM_KEYS = 4096  # client-go's LRU of spam records
_buckets: collections.OrderedDict[tuple[str, ...], tuple[float, float]] = collections.OrderedDict()
_buckets_lock = threading.Lock()


def allowed(involved: Unstructured, component: str) -> bool:
    """Whether ``component`` may record another event about ``involved`` now (a token of its bucket)."""
    meta = involved.get("metadata") or {}
    key = (
        component,
        str(involved.get("kind")),
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        str(meta.get("uid", "")),
    )
    now = time.monotonic()
    with _buckets_lock:
        tokens, last = _buckets.pop(key, (float(SPAM_BURST), now))
        tokens = min(float(SPAM_BURST), tokens + (now - last) / SPAM_REFILL_SECONDS)
        ok = tokens >= 1.0
        _buckets[key] = (tokens - 1.0 if ok else tokens, now)
        while len(_buckets) > SPAM_KEYS:
            _buckets.popitem(last=False)
    return ok


def record_event(
    store: Store, involved: Unstructured, event_type: str, reason: str, message: str, component: str
) -> Unstructured | None:
    """Record one event (None when the spam filter drops it)."""
    if not allowed(involved, component):
        return None
    return store.create(EVENTS.key, new_event(involved, event_type, reason, message, component))


def record_events(store: Store, events: list[tuple[Unstructured, str, str, str, str]]) -> None:
    """Several events ``(involved, type, reason, message, component)`` in one store transaction, in
    order (one resourceVersion each): a controller's pass or a pod group's start records a burst,
    and one commit costs the event loop a fraction of one per event."""
    kept = [new_event(*event) for event in events if allowed(event[0], event[4])]
    if kept:
        store.create_many(EVENTS.key, kept)


def filtered(events: list[tuple[Unstructured, str, str, str, str]]) -> list[Unstructured]:
    """The Event objects of ``events`` the spam filter lets through (to store with other changes)."""
    return [new_event(*event) for event in events if allowed(event[0], event[4])]


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
