"""Declaring a controller and running it (controller-runtime's builder, handlers and reconcile loop).

A controller is a :class:`Reconciler`: it names the sources of its work and reconciles one key at a
time::

    class BatchJobController:
        name = "batch-jobs"
        sources = (For("batch/jobs"), Owns("core/pods", kind="Job", api_version="batch/v1"))

        def reconcile(self, key: Key) -> float | None:   # (or async)
            ...                                          # seconds until the next pass, or None

Keys are :class:`ObjectRef` s (kind, namespace, name; no uid: a recreated object is the same key). :func:`run` starts one informer
per source, maps each event to keys (the object itself, its controlling owner, or the owner a label
names), and works them off one queue: a key is reconciled once however many events arrived while it
waited (a burst of pod status writes is one pass); a :class:`ConflictError` requeues it at once, any
other error retries it with back-off; the returned delay re-adds it later (a deadline, a TTL).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_provider_training.embedded.runtime.context import ControllerContext
from airflow_provider_training.embedded.runtime.queue import WorkQueue
from airflow_provider_training.embedded.store import ConflictError, OwnerGoneError, WatchEvent
from airflow_provider_training.specs.refs import ObjectRef
from airflow_provider_training.specs.resources import BY_KEY
from airflow_provider_training.specs.unstructured import Unstructured, owner_references

log = logging.getLogger(__name__)
Key = ObjectRef


def key_of(resource: str, namespace: str, name: str) -> Key:
    """The key of an object of the store resource ``resource``."""
    return ObjectRef(BY_KEY[resource].kind, namespace, name)


class Source(Protocol):
    @property
    def resource(self) -> str:
        """The store resource whose events this source maps."""

    def keys(self, event: WatchEvent) -> Iterable[Key]:
        """The keys an event of ``resource`` asks to reconcile."""


@dataclass(frozen=True)
class For:
    """The reconciled objects themselves."""

    resource: str

    def keys(self, event: WatchEvent) -> Iterable[Key]:
        return [key_of(self.resource, event.namespace, event.name)]


@dataclass(frozen=True)
class Owns:
    """Objects owned by a reconciled object of ``owner`` (a store resource): by the controlling
    ownerReference of ``kind`` (and ``api_version``), or, with ``label``, by the owner's name in it."""

    resource: str
    owner: str
    kind: str = ""
    api_version: str = ""
    label: str = ""

    def keys(self, event: WatchEvent) -> Iterable[Key]:
        meta = event.object.get("metadata") or {}
        if self.label:
            name = (meta.get("labels") or {}).get(self.label)
            return [key_of(self.owner, event.namespace, name)] if name else []
        return [
            key_of(self.owner, event.namespace, str(ref.get("name", "")))
            # malformed references (written around the API) must not stop the feed for everyone
            for ref in owner_references(event.object)
            if ref.get("controller")
            and ref.get("kind") == self.kind
            and (not self.api_version or ref.get("apiVersion") == self.api_version)
        ]


@dataclass(frozen=True)
class Watches:
    """Any other resource, mapped to keys by ``map``."""

    resource: str
    map: Callable[[WatchEvent], Iterable[Key]]

    def keys(self, event: WatchEvent) -> Iterable[Key]:
        return self.map(event)


class Reconciler(Protocol):
    name: str

    @property
    def sources(self) -> Sequence[Source]:
        """Where the keys come from (``For``, ``Owns``, ``Watches``)."""

    def reconcile(self, key: Key) -> float | Awaitable[float | None] | None:
        """Make the world match the object of ``key``; the seconds until it must be looked at again."""


Hook = Callable[[WatchEvent], None]


class OwnWrites:
    """The resourceVersions a controller wrote itself. Their events come back through its informers
    but carry nothing its pass did not already know (the status it computed, the pods it created),
    so they start no pass: a job's pass is not followed by a pass over its own echo, and the node
    agent's status write does not reconcile the pod again. (controller-runtime filters such events
    with predicates per event kind, e.g. ``GenerationChangedPredicate``; matching the exact
    resourceVersion lets every other change through, a user's status edit included.)"""

    def __init__(self, limit: int = 4096) -> None:
        self._rvs: dict[int, None] = {}
        self._limit = limit

    def add(self, obj: Unstructured) -> Unstructured:
        """Note the write that returned ``obj`` (returned unchanged, for chaining)."""
        self._rvs[int(obj["metadata"]["resourceVersion"])] = None
        if len(self._rvs) > self._limit:  # an echo that never came (a relist skipped it)
            del self._rvs[next(iter(self._rvs))]
        return obj

    def echo(self, event: WatchEvent) -> bool:
        """True once for the event of a noted write."""
        return self._rvs.pop(event.rv, 0) is None


async def run(
    controller: Reconciler,
    ctx: ControllerContext,
    queue: WorkQueue[Key] | None = None,
    *,
    on_event: Hook | None = None,
    own_writes: OwnWrites | None = None,
) -> None:
    """Reconcile ``controller``'s keys until ``ctx.stopping``. ``on_event`` sees every event first
    (for bookkeeping such as releasing what a deleted object held); events of ``own_writes`` map to
    no key."""
    work: WorkQueue[Key] = queue if queue is not None else WorkQueue()
    own = {s.resource for s in controller.sources if isinstance(s, For)}
    loop = asyncio.get_running_loop()
    not_before: dict[Key, float] = {}  # a key whose last pass was long: not again before this time

    async def feed(resource: str, sources: list[Source]) -> None:
        async for event in ctx.informer(resource):
            if on_event is not None:
                on_event(event)
            if event.type == "DELETED" and resource in own:
                work.forget(key_of(resource, event.namespace, event.name))
                not_before.pop(key_of(resource, event.namespace, event.name), None)
            if own_writes is not None and own_writes.echo(event):
                continue
            for source in sources:
                for key in source.keys(event):
                    work.add(key)

    by_resource: dict[str, list[Source]] = {}
    for source in controller.sources:
        by_resource.setdefault(source.resource, []).append(source)
    feeders = [asyncio.create_task(feed(r, s), name=f"{controller.name}:{r}") for r, s in by_resource.items()]
    try:
        while not ctx.stopping.is_set():
            key = await work.get()
            await asyncio.sleep(0)  # let the informers hand over what is already committed: one pass for a burst
            wait = not_before.get(key, 0.0) - loop.time()
            if wait > 0:
                work.add_after(key, wait)
                continue
            started = loop.time()
            await _reconcile_one(controller, work, key)
            took = loop.time() - started
            if took > LONG_PASS:
                # A pass over a large object (a 1,000-pod job's pods) may come again only after as
                # long a pause, so its events are coalesced: one key takes at most half the loop.
                # (Kubernetes' Job controller batches pod events for a second, SyncJobBatchPeriod.)
                not_before[key] = loop.time() + min(took, MAX_PASS_SPACING)
            else:
                not_before.pop(key, None)
    finally:
        for task in feeders:
            task.cancel()


_last_error: dict[tuple[str, Key], str] = {}
LONG_PASS = 0.02  # seconds
MAX_PASS_SPACING = 1.0


async def _reconcile_one(controller: Reconciler, work: WorkQueue[Key], key: Key) -> None:
    try:
        outcome: Any = controller.reconcile(key)
        if inspect.isawaitable(outcome):
            outcome = await outcome
    except ConflictError:
        work.add(key)  # the object changed under the pass: read it again
        return
    except OwnerGoneError:
        work.add(key)  # what the pass wrote for was deleted meanwhile: the next pass sees it gone
        return
    except Exception as exc:  # one object's failure must not stop the others: logged, retried with back-off
        delay = work.retry(key)
        # the traceback once per new error, not once per retry (no flood from one bad object)
        text, seen = f"{type(exc).__name__}: {exc}", (controller.name, key)
        if _last_error.get(seen) != text:
            _last_error[seen] = text
            log.exception("%s: reconciling %s failed; retrying in %.2fs", controller.name, key, delay)
        return
    _last_error.pop((controller.name, key), None)
    work.forget_failures(key)
    if outcome is not None:
        work.add_after(key, float(outcome))
