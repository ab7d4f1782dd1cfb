"""Indexed batch/v1 Jobs, the kind JobSet creates (``completionMode: Indexed``): Kubernetes' Job
controller for that mode, next to ``batchjobs.py`` (which runs the non-indexed ones and leaves these).

One pod per completion index ``0 … completions-1``: name ``<job>-<index>-<5 random>``, ``hostname``
``<job>-<index>``, the label and annotation ``batch.kubernetes.io/job-completion-index`` and the
environment variable ``JOB_COMPLETION_INDEX`` (a fieldRef on that annotation) in every container.
An index is done when one of its pods succeeded; a failed pod (``restartPolicy: Never``) is replaced
after the same back-off as non-indexed Jobs; ``OnFailure`` restarts count towards ``backoffLimit``.
The Job completes when every index succeeded (``CompletionsReached``) and fails with
``BackoffLimitExceeded`` / ``DeadlineExceeded``; ``suspend`` deletes the active pods.

The pod's loopback address is the one reserved for its hostname (``jobset.localize``), so peers
told ``<hostname>.<subdomain>`` reach it. Only Jobs created by controllers are indexed: the API
server still refuses ``completionMode: Indexed`` from users (``apiserver/batchjobs.py``).
"""

from __future__ import annotations

import copy
import secrets
import time
from typing import Any

from airflow_provider_training.embedded import canonical, runtime, serviceaccount, volumes
from airflow_provider_training.embedded.controllers.batchjobs import (
    COMPLETE,
    COMPLETED_MESSAGE,
    FAILED,
    FAILURE_TARGET,
    NAME_ALPHABET,
    SUCCESS_CRITERIA_MET,
    SUSPENDED,
    BatchJobController,
    Sync,
    condition_true,
    pod_ready,
    set_condition,
)
from airflow_provider_training.embedded.network import shared_network
from airflow_provider_training.embedded.resources import BY_KEY, PODS
from airflow_provider_training.embedded.runtime import ControllerContext
from airflow_provider_training.embedded.store import WatchEvent
from airflow_provider_training.specs.annotations import BATCH_CONTROLLER_UID as CONTROLLER_UID
from airflow_provider_training.specs.annotations import BATCH_JOB_NAME as JOB_NAME
from airflow_provider_training.specs.annotations import BATCH_LEGACY_CONTROLLER_UID as LEGACY_CONTROLLER_UID
from airflow_provider_training.specs.annotations import BATCH_LEGACY_JOB_NAME as LEGACY_JOB_NAME
from airflow_provider_training.specs.unstructured import Unstructured, controller_ref

JOBS = BY_KEY["batch/jobs"]
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
COMPONENT = "job-controller"
Key = runtime.controller.Key


def is_indexed(job: Unstructured) -> bool:
    return (job.get("spec") or {}).get("completionMode") == "Indexed"


def index_of(pod: Unstructured) -> int:
    try:
        return int((pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX, "-1"))
    except ValueError:
        return -1


def phase(pod: Unstructured) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def compress_indexes(indexes: set[int]) -> str:
    """``completedIndexes`` as upstream writes it: ``0-2,5``."""
    out: list[str] = []
    for i in sorted(indexes):
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def address_key(hostname: str) -> str:
    """The network allocator's key for a hostname (shared with ``controllers/jobset.py``)."""
    return f"hostname:{hostname}"


class IndexedJobController(BatchJobController):
    """The batch Job controller's rules for ``completionMode: Indexed`` Jobs (JobSet's children): one
    pod per completion index, with a stable hostname; the rest (back-off, deadline, status writes)
    is the plain Job controller's."""

    name = "indexed-jobs"

    def started(self, ctx: ControllerContext) -> None:
        self.network = shared_network(ctx.home)

    def _on_event(self, event: WatchEvent) -> None:
        super()._on_event(event)
        if event.type == "DELETED" and event.resource == PODS.key:
            meta = event.object["metadata"]
            if COMPLETION_INDEX in (meta.get("annotations") or {}):  # its hostname keeps the reservation
                self.network.release_pod(meta.get("namespace", ""), meta["name"])

    async def reconcile(self, key: Key) -> float | None:
        job = self.current(key)
        if job is None or not is_indexed(job):
            return None
        return await IndexedSync(self, job).run()

    async def owned_pods(self, job: Unstructured) -> list[Unstructured]:
        return await self.controlled(PODS.key, job, [(CONTROLLER_UID, job["metadata"]["uid"])])


class IndexedSync(Sync):
    """One sync of an Indexed Job: its own pod plan (per index) over the plain Job's bookkeeping."""

    c: IndexedJobController

    async def run(self) -> float | None:
        if condition_true(self.status, COMPLETE) or condition_true(self.status, FAILED):
            return None
        completions = int(self.spec.get("completions") or 1)
        pods = self.pods = await self.c.owned_pods(self.job)
        active = [
            p for p in pods if not p["metadata"].get("deletionTimestamp") and phase(p) not in ("Succeeded", "Failed")
        ]
        done = {index_of(p) for p in pods if phase(p) == "Succeeded"} & set(range(completions))
        failed = max(int(self.status.get("failed") or 0), sum(phase(p) == "Failed" for p in pods))
        for p in pods:
            if phase(p) == "Failed":
                self.c.failures_seen.setdefault(p["metadata"]["uid"], time.monotonic())
        if self.spec.get("suspend"):
            active = await self.delete_pods(active)
            if condition_true(self.status, SUSPENDED) is None:
                set_condition(self.status, SUSPENDED, "True", "JobSuspended", "Job suspended", self.stamp)
                self.events.append(("Normal", "Suspended", "Job suspended"))
        else:
            if condition_true(self.status, SUSPENDED) is not None:
                set_condition(self.status, SUSPENDED, "False", "JobResumed", "Job resumed", self.stamp)
                self.events.append(("Normal", "Resumed", "Job resumed"))
                self.status["startTime"] = self.stamp
            self.status.setdefault("startTime", self.stamp)
            failure = self.failure(active, failed)
            if failure is not None:
                active = await self.delete_pods(active)
                set_condition(self.status, FAILURE_TARGET, "True", *failure, self.stamp)
                set_condition(self.status, FAILED, "True", *failure, self.stamp)
                self.events.append(("Warning", failure[0], failure[1]))
            elif len(done) >= completions:
                active = await self.delete_pods(active)
                set_condition(self.status, SUCCESS_CRITERIA_MET, "True", *COMPLETED_MESSAGE, self.stamp)
                set_condition(self.status, COMPLETE, "True", *COMPLETED_MESSAGE, self.stamp)
                self.status["completionTime"] = self.stamp
                self.events.append(("Normal", "Completed", "Job completed"))
            else:
                active = await self.scale_indexes(active, done, failed, completions)
        self.status.update(
            active=len(active),
            ready=sum(pod_ready(p) for p in active),
            succeeded=len(done),
            failed=failed,
            terminating=0,
            uncountedTerminatedPods={},
        )
        if done:
            self.status["completedIndexes"] = compress_indexes(done)
        for field in ("active", "succeeded", "failed"):
            if not self.status[field]:
                del self.status[field]
        self.save()
        return min(self.wakeups) + 0.05 if self.wakeups else None

    async def scale_indexes(
        self, active: list[Unstructured], done: set[int], failed: int, completions: int
    ) -> list[Unstructured]:
        running = {index_of(p) for p in active}
        missing = [i for i in range(completions) if i not in done and i not in running]
        if missing and failed:
            initial, cap = self.c.backoff
            delay = min(initial * 2 ** (failed - 1), cap)
            uids = {p["metadata"]["uid"] for p in self.pods if phase(p) == "Failed"}
            last = max((t for uid, t in self.c.failures_seen.items() if uid in uids), default=None)
            wait = 0.0 if last is None else last + delay - time.monotonic()
            if wait > 0:
                self.wakeups.append(wait)
                return active
        # (each batch's addresses written to the node's journal once)
        return active + await self.create_pods(missing, self.build_index_pod, around=self.c.network.batch)

    def build_index_pod(self, index: int) -> Unstructured:
        template = self.spec.get("template") or {}
        tmeta = template.get("metadata") or {}
        uid = self.job["metadata"]["uid"]
        labels = dict(tmeta.get("labels") or {})
        labels.update(
            {CONTROLLER_UID: uid, JOB_NAME: self.name, LEGACY_CONTROLLER_UID: uid, LEGACY_JOB_NAME: self.name}
        )
        labels[COMPLETION_INDEX] = str(index)
        annotations = {**(tmeta.get("annotations") or {}), COMPLETION_INDEX: str(index)}
        spec = copy.deepcopy(template.get("spec") or {})
        hostname = f"{self.name}-{index}"
        spec["hostname"] = hostname
        for group in ("initContainers", "containers"):
            for container in spec.get(group) or []:
                env = [e for e in container.get("env") or [] if e.get("name") != "JOB_COMPLETION_INDEX"]
                env.insert(
                    0,
                    {
                        "name": "JOB_COMPLETION_INDEX",
                        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}},
                    },
                )
                container["env"] = env
        meta: dict[str, Any] = {
            "generateName": f"{hostname}-",
            "namespace": self.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [controller_ref(self.job, JOBS)],
        }
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        canonical.pod(pod, automount=serviceaccount.automounts(self.store, pod))
        self.rename(pod)
        return pod

    def rename(self, pod: Unstructured) -> None:
        """``<hostname>-<5 random>``, with the address reserved for the hostname."""
        meta = pod["metadata"]
        hostname = pod["spec"]["hostname"]
        meta["name"] = f"{hostname}-{''.join(secrets.choice(NAME_ALPHABET) for _ in range(5))}"
        address = self.c.network.pod_address(self.namespace, address_key(hostname))
        self.c.network.assign(self.namespace, meta["name"], address)

    def created(self, pod: Unstructured) -> None:
        volumes.ensure_claims(self.store, self.c.home, pod)  # volumeClaimPolicies' claims, bound at once
        super().created(pod)
