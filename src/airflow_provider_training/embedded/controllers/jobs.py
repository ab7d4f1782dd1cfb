"""The training-job controller: one engine for every kind (``training-operator.md`` §3, §5).

Each reconcile of a job follows the operator's order of operations (§3.1): managedBy, Created,
finished-job cleanup (cleanPodPolicy, TTL, succeeded folding), suspend / resume, backoffLimit and
activeDeadlineSeconds, then per replica type the pods and headless Services (failed-pod restarts,
missing indices created, surplus indices deleted), MPI's ConfigMap and launcher, the replica
snapshot and the kind's status rules. All kind-specific answers come from ``frameworks`` (the pods,
Services and ConfigMaps a job needs are the plugin's ``plan_pods``: MPI's own path lives in its
plugin); this module only reads and writes the store. Addresses and ports in the injected environment come
from the node's allocator, so they are the ones the node agent gives the pods.

Differences from the operator's loop: the activeDeadlineSeconds and TTL checks run on a timer
(``runpolicy.next_wakeup``) rather than only when some other event arrives; ExitCode retries are
counted (annotation ``training.airflow.apache.org/exit-code-retries``) against backoffLimit.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

from airflow_provider_training.embedded import canonical, runtime, serviceaccount
from airflow_provider_training.embedded.events import filtered, record_events
from airflow_provider_training.embedded.network import LocalAddressing, shared_network
from airflow_provider_training.embedded.resources import BY_KEY, BY_KIND, EVENTS, PODS, RESOURCE_TYPES, ResourceType
from airflow_provider_training.embedded.runtime import (
    ControllerContext,
    For,
    Owns,
    OwnWrites,
    WorkQueue,
    controlled_in_slices,
    per_pass,
    slow_start_batch,
)
from airflow_provider_training.embedded.store import ConflictError, NotFoundError, Store, WatchEvent
from airflow_provider_training.frameworks import Event, PodState, objects, plugin, replicas, restarts, runpolicy
from airflow_provider_training.frameworks import conditions as cond
from airflow_provider_training.frameworks import labels as lbl
from airflow_provider_training.frameworks.base import (
    CreatePod,
    CreateService,
    DeletePod,
    DeleteService,
    EnsureObject,
    FrameworkPlugin,
    PodAction,
)
from airflow_provider_training.specs import defaulted_from_dict
from airflow_provider_training.specs.annotations import WORKING_DIR_ANNOTATION
from airflow_provider_training.specs.common import JobStatus
from airflow_provider_training.specs.jobs import TrainingJob
from airflow_provider_training.specs.unstructured import Unstructured, controlled_by

log = logging.getLogger(__name__)
SERVICES = BY_KEY["core/services"]
CONFIGMAPS = BY_KEY["core/configmaps"]
JOB_TYPES = [r for r in RESOURCE_TYPES if r.training_job is not None]
EXIT_CODE_RETRIES_ANNOTATION = "training.airflow.apache.org/exit-code-retries"
COMPONENT = "training-operator"
Key = runtime.controller.Key


def dump_status(status: JobStatus) -> dict[str, Any]:
    out: dict[str, Any] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


class JobController:
    """Reconciles every training-job kind; owns their pods (by controlling ownerReference)."""

    name = "training-jobs"
    sources: tuple[For | Owns, ...] = (
        *(For(rt.key) for rt in JOB_TYPES),
        *(Owns(PODS.key, owner=rt.key, kind=rt.kind) for rt in JOB_TYPES),
    )

    def __init__(self) -> None:
        self.work: WorkQueue[Key] = WorkQueue()
        self.exited: set[tuple[str, int, int]] = set()
        self.own_writes = OwnWrites()

    async def run(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.store: Store = ctx.store
        self.addressing = LocalAddressing(shared_network(ctx.home))
        await runtime.run(self, ctx, self.work, on_event=self._on_event, own_writes=self.own_writes)

    def _on_event(self, event: WatchEvent) -> None:
        rt = BY_KEY.get(event.resource)
        if event.type == "DELETED" and rt is not None and rt.training_job is not None:
            self._forget(event.object)

    def _forget(self, obj: Unstructured) -> None:
        """A deleted job: its pods go by garbage collection; give back their addresses and ports."""
        try:
            job = defaulted_from_dict(obj)
        except (ValueError, KeyError):  # an object written around the API: nothing was allocated for it
            return
        p = plugin(job.kind)
        with self.addressing.network.batch():  # one journal write for the job, not one per pod
            for rtype in p.replica_types(job):
                for i in range(job.replica_specs[rtype].replicas or 0):
                    self.addressing.network.release_pod(job.namespace, p.pod_name(job, rtype, i))

    # -- reconcile ------------------------------------------------------------------------------
    async def reconcile(self, key: Key) -> float | None:
        resource, namespace, name = BY_KIND[key.kind].key, key.namespace, key.name
        obj = self.store.get(resource, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return None
        try:
            job = defaulted_from_dict(obj)
        except (ValueError, KeyError) as exc:  # admitted jobs parse; this guards objects written around the API
            log.warning("%s %s/%s cannot be read: %s", resource, namespace, name, exc)
            return None
        if runpolicy.is_managed_elsewhere(job):
            return None
        p = plugin(job.kind)
        return await Pass(self, p, job, obj, resource, await self.job_pods(p, job)).run()

    # -- store helpers used by a pass -----------------------------------------------------------
    async def job_pods(self, p: FrameworkPlugin, job: TrainingJob) -> list[Unstructured]:
        return await self._owned(PODS.key, p, job)

    async def job_services(self, p: FrameworkPlugin, job: TrainingJob) -> list[Unstructured]:
        return await self._owned(SERVICES.key, p, job)

    async def _owned(self, resource: str, p: FrameworkPlugin, job: TrainingJob) -> list[Unstructured]:
        terms = [(lbl.JOB_NAME, job.name.replace("/", "-")), (lbl.OPERATOR_NAME, p.info.operator_name)]
        return await controlled_in_slices(self.store, resource, job.namespace, job.metadata.uid, terms)


class Pass:
    """One reconcile of one job (§3.1)."""

    def __init__(
        self,
        c: JobController,
        p: FrameworkPlugin,
        job: TrainingJob,
        obj: Unstructured,
        resource: str,
        pods: list[Unstructured],
    ) -> None:
        self.c, self.p, self.job, self.obj, self.resource = c, p, job, obj, resource
        self.store = c.store
        self.now = datetime.now(UTC)
        # (``job`` was parsed for this pass alone and nothing reads its status: no copy needed)
        self.status = job.status if job.status is not None else JobStatus()
        self.before = dump_status(self.status)
        self.events: list[Event] = []
        self.pending: list[tuple[ResourceType, dict[str, Any], str | None, str]] = []
        self.pods = pods
        self.states = [PodState.from_pod(pod, p.info.default_container) for pod in self.pods]
        self.more = False  # more to create or delete than one pass does: the next pass at once

    # -- the steps ------------------------------------------------------------------------------
    async def run(self) -> float | None:
        """One pass; returns the seconds until the next one is due (activeDeadlineSeconds, TTL)."""
        kind, name = self.p.info.kind, self.job.name
        if cond.find(self.status, cond.CREATED) is None:
            cond.mark_created(self.status, kind, name, self.now)
        if self.status.finished:
            await self.finished()
        elif runpolicy.is_suspended(self.job):
            await self.suspended()
        else:
            await self.active()
        self.save()
        if self.more:
            return 0.0
        wake = runpolicy.next_wakeup(self.job, self.status)
        return None if wake is None else (wake - datetime.now(UTC)).total_seconds() + 0.05

    async def finished(self) -> None:
        await self.delete_pods(runpolicy.pods_to_delete_when_finished(self.job, self.states))
        if self.status.is_true(cond.SUCCEEDED):
            replicas.fold_active_into_succeeded(self.status)
        if runpolicy.ttl_expired(self.job, self.status, self.now):
            await self.delete_job()

    async def suspended(self) -> None:
        await self.delete_pods([s.name for s in self.states], all_services=True)
        t = runpolicy.suspend(self.p, self.job, self.status, self.now)
        self.status = t.status
        self.events += t.events

    async def active(self) -> None:
        resumed = runpolicy.resume_if_suspended(self.p, self.job, self.status, self.now)
        if resumed is not None:
            self.status = resumed.status
            self.events += resumed.events
        retries = int((self.obj["metadata"].get("annotations") or {}).get(EXIT_CODE_RETRIES_ANNOTATION, "0"))
        failed = runpolicy.check_limits(self.p, self.job, self.status, self.states, self.now, retries)
        if failed is not None:
            self.status = failed.status
            self.events += failed.events
            await self.delete_pods(runpolicy.pods_to_delete_when_finished(self.job, self.states))
            return
        self.exited_events()
        outcome = restarts.handle_failed_pods(self.p, self.job, self.status, self.states, self.now)
        self.events += [e for e in outcome.events if e.reason != "ExitedWithCode"]
        await self.delete_pods(outcome.delete)
        if outcome.exit_code_retries:
            self.count_exit_code_retries(retries + outcome.exit_code_retries)
        if not self.status.is_true(cond.FAILED):
            await self.pods_and_services()
        self.status.replica_statuses = replicas.replica_statuses(self.p, self.job, self.states)
        update = self.p.update_status(self.job, self.status, self.states, self.now)
        self.status = update.status
        self.events += update.events
        if self.status.finished:
            await self.finished()  # fold counts and apply cleanPodPolicy now: one status write, not two

    # -- pods -----------------------------------------------------------------------------------
    async def pods_and_services(self) -> None:
        """Carry out what the kind's plugin says the job needs now (``plan_pods``): at most
        ``MAX_PER_PASS`` steps, in slow-start batches, each batch's objects written in one transaction
        and its allocations persisted once."""
        services = (
            {s["metadata"]["name"]: s for s in await self.c.job_services(self.p, self.job)}
            if self.p.has_services
            else {}
        )
        actions, more = per_pass(self.p.plan_pods(self.job, self.states, services, self.c.addressing))
        self.more = self.more or more
        await slow_start_batch(
            actions,
            self.carry_out,
            proceed=self.unchanged,
            around=self.c.addressing.network.batch,
            after_batch=self.create_pending,
        )

    def unchanged(self) -> bool:
        """The job is still the one this pass read (not deleted, replaced, suspended or edited)."""
        current = self.store.get(self.resource, self.job.namespace, self.job.name)
        return (
            current is not None
            and current["metadata"]["uid"] == self.obj["metadata"]["uid"]
            and not current["metadata"].get("deletionTimestamp")
            and current.get("spec") == self.obj.get("spec")
        )

    def carry_out(self, action: PodAction) -> None:
        """One step of the plan."""
        if isinstance(action, CreatePod):
            self.create_pod(action.rtype, action.index)
        elif isinstance(action, DeletePod):
            self.delete_pod(action.name)
        elif isinstance(action, CreateService):
            service = objects.build_service(self.p, self.job, action.rtype, action.index)
            if service is not None:
                name = service["metadata"]["name"]
                self.create(SERVICES, dict(service), "SuccessfulCreateService", f"Created service: {name}")
        elif isinstance(action, DeleteService):
            self.delete(SERVICES, action.name, "SuccessfulDeleteService", f"Deleted service: {action.name}")
        elif isinstance(action, EnsureObject):
            self.ensure(dict(action.body), action.update)
        else:
            self.apply_config_map(dict(action.config_map))

    def ensure(self, body: Unstructured, update: tuple[str, ...]) -> None:
        """Create ``body`` unless its name is taken; bring ``update`` fields of one this job controls to it."""
        rt = BY_KIND[body["kind"]]
        current = self.store.get(rt.key, self.job.namespace, body["metadata"]["name"])
        if current is None:
            self.create(rt, body, None, "")
            return
        if controlled_by(current, self.job.metadata.uid) and any(current.get(f) != body.get(f) for f in update):
            current.update({f: body.get(f) for f in update})
            self.store.update(rt.key, current, check_rv=False)

    def apply_config_map(self, config: Unstructured) -> None:
        current = self.store.get(CONFIGMAPS.key, self.job.namespace, config["metadata"]["name"])
        if current is None:
            self.create(CONFIGMAPS, config, None, "")
        elif current.get("data") != config["data"]:
            current["data"] = config["data"]
            self.store.update(CONFIGMAPS.key, current)  # (just read: a Conflict runs the pass again)

    def create_pod(self, rtype: str, index: int) -> None:
        built = objects.build_pod(self.p, self.job, rtype, index, self.c.addressing)
        pod: Unstructured = dict(built.pod)
        workdir = self.job.metadata.annotation(WORKING_DIR_ANNOTATION)
        if workdir:
            annotations = pod["metadata"].setdefault("annotations", {})
            annotations.setdefault(WORKING_DIR_ANNOTATION, workdir)
        self.events += built.events
        name = pod["metadata"]["name"]
        self.create(PODS, pod, "SuccessfulCreatePod", f"Created pod: {name}")

    def create(self, rt: ResourceType, obj: Unstructured, reason: str | None, message: str) -> None:
        """Queue ``obj`` for ``create_pending``: a pass writes what its plan creates in one transaction."""
        if rt is PODS:
            # the API server's defaults and canonical quantities; the token as the pod's account says
            canonical.pod(obj, automount=serviceaccount.automounts(self.store, obj))
        self.pending.append((rt, obj, reason, message))

    def create_pending(self) -> None:
        """Store the objects the plan created, in its order; one that exists already is left as it is."""
        pending, self.pending = self.pending, []
        created = self.store.create_missing(
            [(rt.key, obj) for rt, obj, _, _ in pending], owner=(self.resource, self.obj)
        )
        for obj in created:
            if obj is not None:
                self.c.own_writes.add(obj)
        for (_, _, reason, message), obj in zip(pending, created, strict=True):
            if obj is not None and reason:
                self.events.append(Event("Normal", reason, message))

    def delete(self, rt: ResourceType, name: str, reason: str, message: str) -> None:
        try:
            self.store.delete(rt.key, self.job.namespace, name)
        except NotFoundError:
            return
        self.events.append(Event("Normal", reason, message))

    async def delete_pods(self, names: list[str], all_services: bool = False) -> None:
        """Delete the pods (and their Services), at most ``MAX_PER_PASS`` in slow-start batches."""
        now, more = per_pass(names)
        self.more = self.more or more
        await slow_start_batch(now, self.delete_pod)
        if all_services and self.p.has_services and not more:
            services = [s["metadata"]["name"] for s in await self.c.job_services(self.p, self.job)]
            await slow_start_batch(
                services,
                lambda name: self.delete(SERVICES, name, "SuccessfulDeleteService", f"Deleted service: {name}"),
            )

    def delete_pod(self, name: str) -> None:
        self.delete(PODS, name, "SuccessfulDeletePod", f"Deleted pod: {name}")
        if self.p.has_services:
            self.delete(SERVICES, name, "SuccessfulDeleteService", f"Deleted service: {name}")

    def exited_events(self) -> None:
        """``ExitedWithCode`` once per container exit (upstream repeats it on every reconcile)."""
        for pod, state in zip(self.pods, self.states, strict=True):
            if state.exit_code is None:
                continue
            key = (pod["metadata"].get("uid", ""), state.exit_code, state.restart_count)
            if key in self.c.exited:
                continue
            self.c.exited.add(key)
            self.events.append(
                Event(
                    "Normal",
                    "ExitedWithCode",
                    f"Pod: {self.job.namespace}.{state.name} exited with code {state.exit_code}",
                )
            )

    def count_exit_code_retries(self, total: int) -> None:
        current = self.store.get(self.resource, self.job.namespace, self.job.name)
        if current is None:
            return
        current["metadata"].setdefault("annotations", {})[EXIT_CODE_RETRIES_ANNOTATION] = str(total)
        self.obj = self.store.update(self.resource, current)

    async def delete_job(self) -> None:
        uid = self.obj["metadata"]["uid"]
        dependents, more = per_pass(self.store.dependents(uid))
        await slow_start_batch(dependents, self.delete_quietly)
        if more:
            self.more = True
            return
        with contextlib.suppress(NotFoundError):
            self.store.delete(self.resource, self.job.namespace, self.job.name, uid=uid)
        self.events = []
        self.obj = {}

    def delete_quietly(self, ref: tuple[str, str, str]) -> None:
        with contextlib.suppress(NotFoundError):
            self.store.delete(*ref)

    # -- writing back ---------------------------------------------------------------------------
    def save(self) -> None:
        if not self.obj:
            return
        after = dump_status(self.status)
        events = [(self.obj, e.type, e.reason, e.message, COMPONENT) for e in self.events]
        if after != self.before:
            current = self.store.get(self.resource, self.job.namespace, self.job.name)
            if current is None or current["metadata"]["uid"] != self.obj["metadata"]["uid"]:
                return
            if current["metadata"]["resourceVersion"] != self.obj["metadata"]["resourceVersion"] and current.get(
                "spec"
            ) != self.obj.get("spec"):
                raise ConflictError(self.job.name)
            current["status"] = after
            # the status and the pass's events in one transaction, the status first
            also = [(EVENTS.key, event) for event in filtered(events)]
            self.obj = self.c.own_writes.add(self.store.update(self.resource, current, also_create=also))
            return
        # the pass's events in one transaction (a first pass records eight)
        record_events(self.store, events)
