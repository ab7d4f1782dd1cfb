"""The batch/v1 Job controller: Kubernetes' own Job controller (``pkg/controller/job``) for the
common case, with the ttl-after-finished controller folded in.

Non-indexed Jobs only (admission refuses the rest, ``apiserver/batchjobs.py``): up to
``parallelism`` pods at a time until ``completions`` of them succeed (without ``completions``,
until one succeeds and none is active); a pod that fails under ``restartPolicy: Never`` stays and a
new one replaces it after a back-off (10 s doubling, like the kubelet's, configurable with the same
``AIRFLOW_TRAINING_RESTART_BACKOFF`` / ``…_MAX``); under ``OnFailure`` the kubelet restarts
containers in place and their restarts count. The Job fails with ``BackoffLimitExceeded`` when
failed pods exceed ``backoffLimit`` (restarts reach it, for OnFailure) and with ``DeadlineExceeded``
at ``startTime + activeDeadlineSeconds`` (on a timer); ``suspend`` deletes the active pods. Condition
types, reasons, messages and events are upstream's word for word, including the interim
``SuccessCriteriaMet`` / ``FailureTarget`` conditions of Kubernetes ≥ 1.31.

Difference: the counts come from the Job's pods as they exist (no ``batch.kubernetes.io/job-tracking``
finalizers); a finished pod deleted by hand before the Job ends is no longer counted, and counts never
go down.
"""

from __future__ import annotations

import contextlib
import copy
import os
import secrets
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_provider_training.embedded import canonical, runtime, serviceaccount
from airflow_provider_training.embedded.events import record_events
from airflow_provider_training.embedded.resources import BY_KEY, PODS
from airflow_provider_training.embedded.runtime import (
    For,
    OwnerController,
    Owns,
    per_pass,
    slow_start_batch,
)
from airflow_provider_training.embedded.store import AlreadyExistsError, ConflictError, NotFoundError, WatchEvent
from airflow_provider_training.frameworks.timeutil import format_time, parse_time
from airflow_provider_training.specs.annotations import BATCH_CONTROLLER_UID as CONTROLLER_UID
from airflow_provider_training.specs.annotations import WORKING_DIR_ANNOTATION
from airflow_provider_training.specs.unstructured import ObjectMeta, Unstructured, controller_ref

JOBS = BY_KEY["batch/jobs"]
COMPONENT = "job-controller"
MANAGED_BY = "kubernetes.io/job-controller"
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet

COMPLETE, FAILED, SUSPENDED = "Complete", "Failed", "Suspended"
SUCCESS_CRITERIA_MET, FAILURE_TARGET = "SuccessCriteriaMet", "FailureTarget"
COMPLETED_MESSAGE = ("CompletionsReached", "Reached expected number of succeeded pods")
BACKOFF_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE_EXCEEDED = ("DeadlineExceeded", "Job was active longer than specified deadline")
TERMINAL_PHASES = ("Succeeded", "Failed")
Key = runtime.controller.Key


def pod_backoff() -> tuple[float, float]:
    """Delay before replacing a failed pod: the first, and the cap (upstream: 10 s and 6 min)."""
    return (
        float(os.environ.get("AIRFLOW_TRAINING_RESTART_BACKOFF", "10")),
        float(os.environ.get("AIRFLOW_TRAINING_RESTART_BACKOFF_MAX", "360")),
    )


def condition_true(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in status.get("conditions") or []:
        if c.get("type") == type_ and c.get("status") == "True":
            return dict(c)
    return None


def finished_at(status: dict[str, Any]) -> datetime | None:
    """When the Job finished: its Complete / Failed condition's transition (what the TTL counts from)."""
    for type_ in (COMPLETE, FAILED):
        c = condition_true(status, type_)
        if c is not None and c.get("lastTransitionTime"):
            return parse_time(c["lastTransitionTime"])
    return None


def set_condition(status: dict[str, Any], type_: str, value: str, reason: str, message: str, now: str) -> None:
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    for c in conditions:
        if c.get("type") == type_:
            if c.get("status") != value:
                c["lastTransitionTime"] = now
            c.update(status=value, reason=reason, message=message, lastProbeTime=now)
            return
    conditions.append(
        {
            "type": type_,
            "status": value,
            "reason": reason,
            "message": message,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
    )


def pod_ready(pod: Unstructured) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def restarts(pod: Unstructured) -> int:
    status = pod.get("status") or {}
    return sum(
        int(cs.get("restartCount") or 0)
        for key in ("initContainerStatuses", "containerStatuses")
        for cs in status.get(key) or []
    )


class BatchJobController(OwnerController):
    name = "batch-jobs"
    sources = (For(JOBS.key), Owns(PODS.key, owner=JOBS.key, kind="Job", api_version="batch/v1"))
    resource = JOBS.key
    managed_by = MANAGED_BY

    def __init__(self) -> None:
        super().__init__()
        self.failures_seen: dict[str, float] = {}  # failed pod uid -> when this controller saw it fail
        self.backoff = pod_backoff()

    def _on_event(self, event: WatchEvent) -> None:
        if event.type == "DELETED" and event.resource == PODS.key:
            self.failures_seen.pop(event.object["metadata"].get("uid", ""), None)

    # -- reconcile ------------------------------------------------------------------------------
    async def reconcile(self, key: Key) -> float | None:
        job = self.current(key)
        if job is None or (job.get("spec") or {}).get("completionMode") == "Indexed":
            return None  # JobSet's child Jobs: controllers/indexedjobs.py
        return await Sync(self, job).run()

    async def owned_pods(self, job: Unstructured) -> list[Unstructured]:
        uid = job["metadata"]["uid"]
        selector = ((job.get("spec") or {}).get("selector") or {}).get("matchLabels") or {CONTROLLER_UID: uid}
        return await self.controlled(PODS.key, job, selector.items())


class Sync:
    """One ``syncJob`` of one Job."""

    def __init__(self, c: BatchJobController, job: Unstructured) -> None:
        self.c, self.job, self.store = c, job, c.store
        self.spec: dict[str, Any] = job.get("spec") or {}
        self.namespace, self.name = job["metadata"]["namespace"], job["metadata"]["name"]
        self.status: dict[str, Any] = copy.deepcopy(job.get("status") or {})
        self.before = copy.deepcopy(self.status)
        self.now = datetime.now(UTC)
        self.stamp = format_time(self.now)
        self.events: list[tuple[str, str, str]] = []
        self.wakeups: list[float] = []  # seconds from now
        self.pods: list[Unstructured] = []  # the Job's pods as this sync read them

    async def run(self) -> float | None:
        """One sync; returns the seconds until the next is due (a back-off, a deadline, a TTL)."""
        if condition_true(self.status, COMPLETE) or condition_true(self.status, FAILED):
            await self.finished()
            return self.next_pass()
        pods = self.pods = await self.c.owned_pods(self.job)
        active = [
            p for p in pods if not p["metadata"].get("deletionTimestamp") and self.phase(p) not in TERMINAL_PHASES
        ]
        succeeded = max(int(self.status.get("succeeded") or 0), sum(self.phase(p) == "Succeeded" for p in pods))
        failed = max(int(self.status.get("failed") or 0), sum(self.phase(p) == "Failed" for p in pods))
        for p in pods:
            if self.phase(p) == "Failed":
                self.c.failures_seen.setdefault(p["metadata"]["uid"], time.monotonic())
        if self.spec.get("suspend"):
            active = await self.suspend(active)
        else:
            self.resume()
            if self.status.get("startTime") is None:
                self.status["startTime"] = self.stamp
            failure = self.failure(active, failed)
            if failure is not None:
                active = await self.delete_pods(active)
                self.fail(*failure)
            elif self.complete(succeeded, active):
                active = await self.delete_pods(active)
            else:
                active = await self.scale(active, succeeded, failed)
        self.status.update(
            active=len(active),
            ready=sum(pod_ready(p) for p in active),
            succeeded=succeeded,
            failed=failed,
            terminating=0,
            uncountedTerminatedPods={},
        )
        for field in ("active", "succeeded", "failed"):  # omitempty upstream
            if not self.status[field]:
                del self.status[field]
        self.save()
        return self.next_pass()

    @staticmethod
    def phase(pod: Unstructured) -> str:
        return str((pod.get("status") or {}).get("phase") or "Pending")

    # -- the steps ------------------------------------------------------------------------------
    async def finished(self) -> None:
        ttl = self.spec.get("ttlSecondsAfterFinished")
        at = finished_at(self.status)
        if ttl is None or at is None:
            return
        remaining = (at + timedelta(seconds=int(ttl)) - self.now).total_seconds()
        if remaining > 0:
            self.wakeups.append(remaining)
            return
        # The ttl-after-finished controller deletes with Foreground propagation: pods first.
        uid = self.job["metadata"]["uid"]
        dependents, more = per_pass(self.store.dependents(uid))
        await slow_start_batch(dependents, self.delete_quietly)
        if more:
            self.wakeups.append(0.0)
            return
        with contextlib.suppress(NotFoundError):
            self.store.delete(JOBS.key, self.namespace, self.name, uid=uid)

    async def suspend(self, active: list[Unstructured]) -> list[Unstructured]:
        left = await self.delete_pods(active)
        if condition_true(self.status, SUSPENDED) is None:
            set_condition(self.status, SUSPENDED, "True", "JobSuspended", "Job suspended", self.stamp)
            self.events.append(("Normal", "Suspended", "Job suspended"))
        return left

    def resume(self) -> None:
        if condition_true(self.status, SUSPENDED) is not None:
            set_condition(self.status, SUSPENDED, "False", "JobResumed", "Job resumed", self.stamp)
            self.events.append(("Normal", "Resumed", "Job resumed"))
            self.status["startTime"] = self.stamp  # upstream restarts the deadline's clock on resume

    def failure(self, active: list[Unstructured], failed: int) -> tuple[str, str] | None:
        limit = int(self.spec.get("backoffLimit", 6))
        if failed > limit:
            return BACKOFF_EXCEEDED
        if (self.spec.get("template") or {}).get("spec", {}).get("restartPolicy") == "OnFailure":
            total = sum(restarts(p) for p in active)
            if (total > 0) if limit == 0 else (total >= limit):
                return BACKOFF_EXCEEDED
        deadline = self.spec.get("activeDeadlineSeconds")
        if deadline is not None and self.status.get("startTime"):
            remaining = (
                parse_time(self.status["startTime"]) + timedelta(seconds=int(deadline)) - self.now
            ).total_seconds()
            if remaining <= 0:
                return DEADLINE_EXCEEDED
            self.wakeups.append(remaining)
        return None

    def fail(self, reason: str, message: str) -> None:
        set_condition(self.status, FAILURE_TARGET, "True", reason, message, self.stamp)
        set_condition(self.status, FAILED, "True", reason, message, self.stamp)
        self.events.append(("Warning", reason, message))
        if self.spec.get("ttlSecondsAfterFinished") is not None:
            self.wakeups.append(float(self.spec["ttlSecondsAfterFinished"]))

    def complete(self, succeeded: int, active: list[Unstructured]) -> bool:
        completions = self.spec.get("completions")
        done = succeeded >= completions if completions is not None else succeeded > 0 and not active
        if not done:
            return False
        set_condition(self.status, SUCCESS_CRITERIA_MET, "True", *COMPLETED_MESSAGE, self.stamp)
        set_condition(self.status, COMPLETE, "True", *COMPLETED_MESSAGE, self.stamp)
        self.status["completionTime"] = self.stamp
        self.events.append(("Normal", "Completed", "Job completed"))
        if self.spec.get("ttlSecondsAfterFinished") is not None:
            self.wakeups.append(float(self.spec["ttlSecondsAfterFinished"]))
        return True

    async def scale(self, active: list[Unstructured], succeeded: int, failed: int) -> list[Unstructured]:
        parallelism = int(self.spec.get("parallelism", 1))
        completions = self.spec.get("completions")
        if completions is None:
            wanted = 0 if succeeded > 0 else parallelism
        else:
            wanted = max(0, min(parallelism, int(completions) - succeeded))
        if len(active) > wanted:
            surplus = sorted(active, key=lambda p: p["metadata"].get("creationTimestamp", ""))[wanted:]
            left = await self.delete_pods(surplus)
            gone = {id(p) for p in surplus} - {id(p) for p in left}
            return [p for p in active if id(p) not in gone]
        missing = wanted - len(active)
        if missing and failed:
            wait = self.backoff_remaining(failed)
            if wait > 0:
                self.wakeups.append(wait)
                return active
        return active + await self.create_pods(list(range(missing)), lambda _: self.build_pod())

    async def create_pods(
        self,
        indexes: list[int],
        build: Callable[[int], dict[str, Any]],
        around: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> list[Unstructured]:
        """The pods ``build(i)`` gives, in slow-start batches (each batch one transaction) while the
        Job stays as this sync read it; at most ``MAX_PER_PASS`` in one sync, the next at once for
        the rest. Returns the pods created."""
        now, more = per_pass(indexes)
        if more:
            self.wakeups.append(0.0)
        created: list[Unstructured] = []
        pending: list[Unstructured] = []

        def store_batch() -> None:
            stored = self.store.create_missing([(PODS.key, pod) for pod in pending], owner=(JOBS.key, self.job))
            for pod, obj in zip(pending, stored, strict=True):
                created.append(obj if obj is not None else self.create_renamed(pod))
                self.created(created[-1])
            pending.clear()

        await slow_start_batch(
            now, lambda i: pending.append(build(i)), proceed=self.unchanged, after_batch=store_batch, around=around
        )
        return created

    def create_renamed(self, pod: Unstructured) -> Unstructured:
        """A pod whose random name was taken: another, as the API server's generateName retries."""
        for _ in range(5):
            self.rename(pod)
            try:
                return self.store.create(PODS.key, pod, owner=(JOBS.key, self.job))
            except AlreadyExistsError:
                continue
        raise AlreadyExistsError(pod["metadata"]["name"])

    def rename(self, pod: Unstructured) -> None:
        pod["metadata"]["name"] = f"{self.name}-{''.join(secrets.choice(NAME_ALPHABET) for _ in range(5))}"

    def created(self, pod: Unstructured) -> None:
        self.events.append(("Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}"))

    def unchanged(self) -> bool:
        """The Job is still the one this sync read (not deleted, replaced, suspended or edited)."""
        current = self.store.get(JOBS.key, self.namespace, self.name)
        return (
            current is not None
            and current["metadata"]["uid"] == self.job["metadata"]["uid"]
            and not current["metadata"].get("deletionTimestamp")
            and current.get("spec") == self.job.get("spec")
        )

    def backoff_remaining(self, failed: int) -> float:
        """Seconds until a failed pod may be replaced: upstream's exponential back-off after the last failure."""
        initial, cap = self.c.backoff
        delay = min(initial * 2 ** (failed - 1), cap)
        last = self.last_failure()
        return 0.0 if last is None else last + delay - time.monotonic()

    def last_failure(self) -> float | None:
        uids = {p["metadata"]["uid"] for p in self.pods if self.phase(p) == "Failed"}  # (as this sync read them)
        seen = [t for uid, t in self.c.failures_seen.items() if uid in uids]
        return max(seen, default=None)

    # -- pods -----------------------------------------------------------------------------------
    def build_pod(self) -> Unstructured:
        template = self.spec.get("template") or {}
        tmeta = template.get("metadata") or {}
        meta: ObjectMeta = {
            "name": f"{self.name}-{''.join(secrets.choice(NAME_ALPHABET) for _ in range(5))}",
            "generateName": f"{self.name}-",
            "namespace": self.namespace,
            "labels": dict(tmeta.get("labels") or {}),
            "ownerReferences": [controller_ref(self.job, JOBS)],
        }
        annotations = dict(tmeta.get("annotations") or {})
        workdir = (self.job["metadata"].get("annotations") or {}).get(WORKING_DIR_ANNOTATION)
        if workdir:
            annotations.setdefault(WORKING_DIR_ANNOTATION, workdir)
        if annotations:
            meta["annotations"] = annotations
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": copy.deepcopy(template.get("spec") or {}),
        }
        canonical.pod(pod, automount=serviceaccount.automounts(self.store, pod))  # (as the API server stores it)
        return pod

    async def delete_pods(self, pods: list[Unstructured]) -> list[Unstructured]:
        """Delete ``pods`` (at most ``MAX_PER_PASS``, in slow-start batches); returns those left for
        the next sync, which comes at once."""
        now, more = per_pass(pods)
        if more:
            self.wakeups.append(0.0)
        await slow_start_batch(now, self.delete_pod)
        return list(pods[len(now) :])

    def delete_pod(self, pod: Unstructured) -> None:
        name = pod["metadata"]["name"]
        try:
            self.store.delete(PODS.key, self.namespace, name, uid=pod["metadata"]["uid"])
        except NotFoundError:
            return
        self.events.append(("Normal", "SuccessfulDelete", f"Deleted pod: {name}"))

    def delete_quietly(self, ref: tuple[str, str, str]) -> None:
        with contextlib.suppress(NotFoundError):
            self.store.delete(*ref)

    # -- writing back ---------------------------------------------------------------------------
    def save(self) -> None:
        obj = self.job
        if self.status != self.before:
            current = self.store.get(JOBS.key, self.namespace, self.name)
            if current is None or current["metadata"]["uid"] != self.job["metadata"]["uid"]:
                return
            if current.get("spec") != self.job.get("spec"):
                raise ConflictError(self.name)  # changed under us (e.g. suspended): sync again
            current["status"] = self.status
            obj = self.store.update(JOBS.key, current)  # (a Conflict: the sync runs again)
        # one transaction, however many pods the sync created or deleted
        record_events(self.store, [(obj, type_, reason, message, COMPONENT) for type_, reason, message in self.events])

    def next_pass(self) -> float | None:
        return min(self.wakeups) + 0.05 if self.wakeups else None
