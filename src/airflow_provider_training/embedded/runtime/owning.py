"""The skeleton shared by the controllers of objects that own others: batch Jobs and Indexed Jobs
(pods), JobSets (Jobs) and TrainJobs (a JobSet). Each was written by copy — its work queue, the
store taken from the context, the "is this object mine to reconcile" check, the children it
controls read in slices, the quiet delete of a dependent already gone — so a fix to one (the
``managedBy`` check, reading children without holding the loop) had to be made four times.

A subclass declares ``name``, ``sources`` (``For``/``Owns``), ``resource`` and ``managed_by`` and
writes ``reconcile``; ``started`` and ``_on_event`` are its hooks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from airflow_provider_training.embedded.runtime.batches import list_in_slices
from airflow_provider_training.embedded.runtime.context import ControllerContext
from airflow_provider_training.embedded.runtime.controller import Key, Source, run
from airflow_provider_training.embedded.runtime.queue import WorkQueue
from airflow_provider_training.embedded.store import NotFoundError, Store, WatchEvent
from airflow_provider_training.specs.unstructured import Unstructured, controlled_by, meta


async def controlled_in_slices(
    store: Store, resource: str, namespace: str, owner_uid: str | None, label_equals: Iterable[tuple[str, str]]
) -> list[Unstructured]:
    """``Store.list_controlled`` decoded in slices that let the loop serve others (a 1,000-pod job's
    pods are read every pass): the objects the selector ``label_equals`` finds in ``namespace``
    whose controlling ownerReference names ``owner_uid``."""
    items = await list_in_slices(store, resource, namespace, label_equals=label_equals)
    return [obj for obj in items if controlled_by(obj, owner_uid)]


class OwnerController:
    name: str
    sources: ClassVar[Sequence[Source]]
    resource: ClassVar[str]  # the store key of the kind it reconciles
    managed_by: ClassVar[str]  # its ``spec.managedBy`` value (upstream's default when the field is unset)
    store: Store
    ctx: ControllerContext

    def __init__(self) -> None:
        self.work: WorkQueue[Key] = WorkQueue()

    async def run(self, ctx: ControllerContext) -> None:
        self.store, self.ctx, self.home = ctx.store, ctx, ctx.home
        self.started(ctx)
        await run(self, ctx, self.work, on_event=self._on_event)

    async def reconcile(self, key: Key) -> float | None:
        """Make the world match the object of ``key`` (the subclass's pass)."""
        raise NotImplementedError

    def started(self, ctx: ControllerContext) -> None:
        """What the controller sets up once the daemon hands it the context (its network, say)."""

    def _on_event(self, event: WatchEvent) -> None:
        """Every event before it maps to a key: bookkeeping for what a deleted object held."""

    def current(self, key: Key) -> Unstructured | None:
        """The stored object of ``key`` when it is this controller's to reconcile: not gone, not being
        deleted, and not handed to another controller by ``spec.managedBy`` (MultiKueue's, say)."""
        obj = self.store.get(self.resource, key.namespace, key.name)
        if obj is None or meta(obj).get("deletionTimestamp"):
            return None
        if (obj.get("spec") or {}).get("managedBy", self.managed_by) != self.managed_by:
            return None
        return obj

    async def controlled(
        self, resource: str, owner: Mapping[str, Any], label_equals: Iterable[tuple[str, str]]
    ) -> list[Unstructured]:
        """The objects of ``resource`` the selector ``label_equals`` finds that ``owner`` controls
        (:func:`controlled_in_slices` in its namespace)."""
        return await controlled_in_slices(
            self.store, resource, meta(owner).get("namespace", ""), meta(owner).get("uid"), label_equals
        )

    def delete_quietly(self, ref: tuple[str, str, str]) -> None:
        """Delete a dependent (resource, namespace, name); one already gone is no error."""
        with contextlib.suppress(NotFoundError):
            self.store.delete(*ref)
