"""The JobSet controller (JobSet v0.12.0, ``jobset.x-k8s.io/v1alpha2``) on the controller runtime.

The decisions are ``frameworks.trainer.jobset``'s (child Jobs with JobSet's names, labels and
annotations, ``replicatedJobsStatus``, success policy, failure policy with ``maxRestarts``,
``dependsOn``, ``startupPolicy: InOrder``); this module does the I/O in upstream's order of a pass:
finished → delete active Jobs, and ``ttlSecondsAfterFinished`` after finishing delete the JobSet
(foreground); a failed Job → the failure policy (fail, or restart: delete every Job of the old
attempt and create new ones); success policy; the headless Service; create Jobs; suspend or resume
them (a resumed Job gets the pod template's labels, annotations, nodeSelector, tolerations and
schedulingGates the JobSet has now, which may change while suspended). Child Jobs are Indexed (run
by ``indexedjobs.py``).

Embedded difference: a pod's DNS name ``<jobset>-<replicatedJob>-<job>-<pod>.<subdomain>`` does not
resolve on one machine, so wherever it appears in a child Job's pod template (env, command, args)
it is replaced by the loopback address reserved for that hostname, which the pod then gets. The
JobSet itself keeps upstream's values.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_provider_training.embedded import runtime
from airflow_provider_training.embedded.controllers.indexedjobs import address_key
from airflow_provider_training.embedded.events import record_events
from airflow_provider_training.embedded.network import Network, shared_network
from airflow_provider_training.embedded.resources import BY_KEY
from airflow_provider_training.embedded.runtime import (
    ControllerContext,
    For,
    OwnerController,
    Owns,
    per_pass,
    slow_start_batch,
)
from airflow_provider_training.embedded.store import AlreadyExistsError, ConflictError, NotFoundError, WatchEvent
from airflow_provider_training.frameworks.trainer import jobset as js
from airflow_provider_training.frameworks.trainer.status import find, set_condition
from airflow_provider_training.specs.annotations import WORKING_DIR_ANNOTATION
from airflow_provider_training.specs.batch import indexed_job_issues
from airflow_provider_training.specs.unstructured import OwnerReference, Unstructured, controller_ref

log = logging.getLogger(__name__)
JOBSETS = BY_KEY["jobset.x-k8s.io/jobsets"]
JOBS = BY_KEY["batch/jobs"]
SERVICES = BY_KEY["core/services"]
COMPONENT = "jobset-controller"
MANAGED_BY = "jobset.sigs.k8s.io/jobset-controller"
Key = runtime.controller.Key


def pod_hostnames(jobset: Unstructured) -> list[str]:
    """Every pod hostname the JobSet's Jobs will have: ``<js>-<rjob>-<jobIdx>-<podIdx>``."""
    out = []
    name = jobset["metadata"]["name"]
    for rjob in jobset["spec"].get("replicatedJobs") or []:
        spec = (rjob.get("template") or {}).get("spec") or {}
        pods = int(spec.get("completions") or spec.get("parallelism") or 1)
        for j in range(int(rjob.get("replicas", 1))):
            out += [f"{js.job_name(name, rjob['name'], j)}-{p}" for p in range(pods)]
    return out


def localize(value: Any, jobset: Unstructured, network: Network) -> Any:
    """``value`` (any JSON) with every ``<hostname>.<subdomain>`` of the JobSet's pods replaced by
    the loopback address reserved for that hostname."""
    namespace = jobset["metadata"].get("namespace", "default")
    subdomain = js.subdomain(jobset)
    text = json.dumps(value)
    # the names the text holds, found in one scan (not one search per pod: a 20,000-node JobSet);
    # a name may follow other letters ("...slots=1\\nmpi-node-0-1.mpi" in JSON): each tail of a word
    named: set[str] = set()
    for match in re.finditer(rf"([a-z0-9][-a-z0-9]*)\.{re.escape(subdomain)}", text):
        word = match.group(1)
        named.update(word[i:] for i in range(len(word)))
    hostnames = named & set(pod_hostnames(jobset)) if named else set()
    for hostname in sorted(hostnames, key=len, reverse=True):
        text = text.replace(f"{hostname}.{subdomain}", network.pod_address(namespace, address_key(hostname)))
    return json.loads(text)


def release(jobset: Unstructured, network: Network) -> None:
    namespace = jobset["metadata"].get("namespace", "default")
    with network.batch():  # one journal write for the JobSet, not one per pod
        for hostname in pod_hostnames(jobset):
            network.release_pod(namespace, address_key(hostname))


def merge_mutable(job_template: dict[str, Any], rjob_template: dict[str, Any]) -> None:
    """Into a Job's pod template, what JobSet lets change while suspended (for Kueue): labels,
    annotations and nodeSelector merged (the JobSet's win), tolerations and schedulingGates added
    where missing, as ``collections.MergeMaps`` / ``MergeSlices`` do."""
    for part, key in (("metadata", "labels"), ("metadata", "annotations"), ("spec", "nodeSelector")):
        theirs = (rjob_template.get(part) or {}).get(key) or {}
        if theirs:
            mine = job_template.setdefault(part, {})
            mine[key] = {**(mine.get(key) or {}), **theirs}
    for key in ("tolerations", "schedulingGates"):
        theirs = (rjob_template.get("spec") or {}).get(key) or []
        if theirs:
            spec = job_template.setdefault("spec", {})
            merged = list(spec.get(key) or [])
            merged += [item for item in theirs if item not in merged]
            spec[key] = merged


def _set(conditions: list[dict[str, Any]], parts: tuple[str, str, str, str], now: datetime) -> bool:
    """``updateCondition``: a False condition is written only over an existing one; True flips
    StartupPolicyInProgress/Completed exclusive. Returns whether anything changed."""
    kind, value, reason, message = parts
    existing = find(conditions, kind)
    if value == "False" and existing is None:
        return False
    if existing is not None and (existing.get("status"), existing.get("reason"), existing.get("message")) == (
        value,
        reason,
        message,
    ):
        return False
    set_condition(conditions, {"type": kind, "status": value, "reason": reason, "message": message}, now)
    if value == "True":
        other = {
            "StartupPolicyInProgress": "StartupPolicyCompleted",
            "StartupPolicyCompleted": "StartupPolicyInProgress",
        }
        twin = find(conditions, other.get(kind, ""))
        if twin is not None and twin.get("status") == "True":
            twin["status"] = "False"
    return True


class JobCreationError(Exception):
    """A child Job the API server would refuse (the pass is retried on the runtime's back-off)."""


class JobSetController(OwnerController):
    name = "jobsets"
    sources = (
        For(JOBSETS.key),
        Owns(JOBS.key, owner=JOBSETS.key, kind="JobSet", api_version="jobset.x-k8s.io/v1alpha2"),
    )
    resource = JOBSETS.key
    managed_by = MANAGED_BY

    def __init__(self) -> None:
        super().__init__()
        self.creation_failures: dict[str, str] = {}  # JobSet uid -> the last JobCreationFailed message

    def started(self, ctx: ControllerContext) -> None:
        self.network = shared_network(ctx.home)

    def _on_event(self, event: WatchEvent) -> None:
        if event.type == "DELETED" and event.resource == JOBSETS.key:
            self.creation_failures.pop(event.object.get("metadata", {}).get("uid", ""), None)
            with contextlib.suppress(KeyError, TypeError):
                release(event.object, self.network)

    async def reconcile(self, key: Key) -> float | None:
        obj = self.current(key)
        return await JobSetPass(self, obj).run() if obj is not None else None

    async def owned_jobs(self, jobset: Unstructured) -> list[Unstructured]:
        return await self.controlled(JOBS.key, jobset, [(js.JOBSET_NAME, jobset["metadata"]["name"])])

    async def delete_tree(self, resource: str, obj: Unstructured) -> bool:
        """Foreground deletion: dependents (a JobSet's Jobs and Service, a Job's pods) first, each with
        its own dependents, in slow-start batches, then the object; False when it is not gone yet
        (more dependents than one pass deletes, or gone before)."""
        meta = obj["metadata"]
        dependents, more = per_pass(self.store.dependents(meta["uid"]))
        leaves = []
        for ref in dependents:
            dependent = self.store.get(*ref)
            if dependent is not None and self.store.dependents(dependent["metadata"]["uid"]):
                more = not await self.delete_tree(ref[0], dependent) or more
            else:
                leaves.append(ref)
        await slow_start_batch(leaves, self.delete_quietly)
        if more:
            return False
        try:
            self.store.delete(resource, meta.get("namespace", ""), meta["name"], uid=meta["uid"])
        except NotFoundError:
            return False
        return True


class JobSetPass:
    def __init__(self, c: JobSetController, jobset: Unstructured) -> None:
        self.c, self.store = c, c.store
        self.jobset = jobset
        self.namespace, self.name = jobset["metadata"]["namespace"], jobset["metadata"]["name"]
        self.status: dict[str, Any] = copy.deepcopy(jobset.get("status") or {})
        self.before = copy.deepcopy(self.status)
        self.conditions: list[dict[str, Any]] = self.status.setdefault("conditions", [])
        self.now = datetime.now(UTC)
        self.events: list[tuple[str, str, str]] = []
        self.requeue: float | None = None  # more Jobs to create than one pass creates: again at once
        self._templates: dict[str, dict[str, Any]] | None = None

    @property
    def view(self) -> Unstructured:
        """The JobSet with this pass's status (what the pure decisions read)."""
        return {**self.jobset, "status": self.status}

    async def run(self) -> float | None:
        self.status.setdefault("restarts", 0)
        owned = js.classify(self.view, await self.c.owned_jobs(self.jobset))
        for job in owned.previous:  # an earlier attempt's Jobs: foreground deletion
            await self.c.delete_tree(JOBS.key, job)
        statuses = js.replicated_jobs_status(self.view, owned)
        self.status["replicatedJobsStatus"] = statuses
        if self.status.get("terminalState"):
            for job in owned.active:
                await self.c.delete_tree(JOBS.key, job)
            self.save()
            return await self.ttl_after_finished()
        if owned.failed:
            self.failure_policy(owned)
            return self.save()
        if owned.successful and js.success_policy_met(self.view, owned):
            _set(self.conditions, js.COMPLETED, self.now)
            self.status["terminalState"] = "Completed"
            _set(
                self.conditions,
                ("RestartingJobSet", "False", "JobSetCompleted", "jobset completed successfully"),
                self.now,
            )
            self.events.append(("Normal", js.COMPLETED[2], js.COMPLETED[3]))
            return self.save()
        if js.dns_hostnames(self.jobset):
            self.ensure_service()
        creation = js.jobs_to_create(self.view, owned, statuses)
        jobs, more = per_pass(creation.jobs)
        await slow_start_batch(jobs, self.create_job, proceed=self.unchanged)
        if creation.startup_condition is not None:
            _set(self.conditions, creation.startup_condition, self.now)
        await slow_start_batch(owned.active, self.suspend_or_resume_job)
        self.suspended_condition()
        if more:
            self.requeue = 0.0
        if (
            not self.jobset["spec"].get("suspend")
            and statuses
            and all(
                s["ready"] + s["succeeded"] >= int(r.get("replicas", 1))
                for s, r in zip(
                    sorted(statuses, key=lambda s: s["name"]),
                    sorted(self.jobset["spec"]["replicatedJobs"], key=lambda r: r["name"]),
                    strict=False,
                )
            )
        ):
            _set(self.conditions, ("RestartingJobSet", "False", "JobsReady", "all jobs are ready"), self.now)
        return self.save()

    async def ttl_after_finished(self) -> float | None:
        """``executeTTLAfterFinishedPolicy``: a finished JobSet with ``ttlSecondsAfterFinished`` is
        deleted (foreground: its Jobs and their pods first) that long after its ``Completed`` or
        ``Failed`` condition turned True; until then, come back when it is due."""
        ttl = self.jobset["spec"].get("ttlSecondsAfterFinished")
        if not isinstance(ttl, int) or isinstance(ttl, bool):
            return None
        finished = next(
            (
                cond.get("lastTransitionTime")
                for cond in self.conditions
                if cond.get("type") in ("Completed", "Failed") and cond.get("status") == "True"
            ),
            None,
        )
        if not finished:
            return None
        expires = datetime.fromisoformat(str(finished).replace("Z", "+00:00")) + timedelta(seconds=ttl)
        remaining = (expires - datetime.now(UTC)).total_seconds()
        if remaining > 0:
            return remaining
        log.info("JobSet %s/%s: ttlSecondsAfterFinished (%ss) passed, deleting it", self.namespace, self.name, ttl)
        await self.c.delete_tree(JOBSETS.key, self.jobset)
        return None

    def failure_policy(self, owned: js.ChildJobs) -> None:
        decision = js.failure_decision(self.view, owned.failed)
        if decision.failed:
            _set(self.conditions, ("Failed", "True", decision.reason, decision.message), self.now)
            self.status["terminalState"] = "Failed"
            _set(self.conditions, ("RestartingJobSet", "False", "JobSetFailed", "jobset failed"), self.now)
            self.events.append(("Warning", decision.reason, decision.message))
            return
        self.status["restarts"] = int(self.status.get("restarts", 0)) + 1
        if decision.counts_towards_max:
            self.status["restartsCountTowardsMax"] = int(self.status.get("restartsCountTowardsMax", 0)) + 1
        _set(self.conditions, ("RestartingJobSet", "True", decision.reason, decision.message), self.now)
        self.events.append(
            ("Warning", decision.event_reason or decision.action + "FailurePolicyAction", decision.message)
        )

    def ensure_service(self) -> None:
        service = js.headless_service(self.jobset)
        if self.store.get(SERVICES.key, self.namespace, service["metadata"]["name"]) is not None:
            return
        service["metadata"]["ownerReferences"] = [self.owner_reference()]
        service["spec"].update(type="ClusterIP", clusterIPs=["None"], sessionAffinity="None")
        with contextlib.suppress(AlreadyExistsError):
            self.store.create(SERVICES.key, service)

    def owner_reference(self) -> OwnerReference:
        return controller_ref(self.jobset, JOBSETS)

    def create_job(self, job: Unstructured) -> None:
        job["metadata"]["ownerReferences"] = [self.owner_reference()]
        spec = job["spec"]
        spec.setdefault("completionMode", "Indexed")
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("parallelism", 1)
        spec.setdefault("completions", spec["parallelism"])
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        pod = spec.setdefault("template", {}).setdefault("spec", {})
        pod.setdefault("restartPolicy", "OnFailure")
        pod.setdefault("terminationGracePeriodSeconds", 30)
        workdir = (self.jobset["metadata"].get("annotations") or {}).get(WORKING_DIR_ANNOTATION)
        if workdir:  # the node's working directory for the pods (a TrainJob's, from the DAG folder)
            pod_meta = spec["template"].setdefault("metadata", {})
            pod_meta.setdefault("annotations", {}).setdefault(WORKING_DIR_ANNOTATION, workdir)
        issues = indexed_job_issues(spec)
        if issues:
            # kube-apiserver refuses such a Job: the JobSet controller records why and tries again
            self.job_creation_failed(job, issues)
        spec["template"] = localize(spec["template"], self.jobset, self.c.network)
        try:
            created = self.store.create(JOBS.key, job, owner=(JOBSETS.key, self.jobset))
        except AlreadyExistsError:
            return
        # The API server's generated selector and pod-template labels, as for any Job.
        uid = created["metadata"]["uid"]
        labels = created["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": created["metadata"]["name"],
                "controller-uid": uid,
                "job-name": created["metadata"]["name"],
            }
        )
        created["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        self.store.update(JOBS.key, created, check_rv=False)
        self.events.append(("Normal", "SuccessfulCreate", f"created job {created['metadata']['name']}"))

    def job_creation_failed(self, job: Unstructured, issues: list[tuple[str, str]]) -> None:
        """What the JobSet controller does when the API server refuses a Job: a Warning event
        ``JobCreationFailed`` (once per message here), and the pass fails, to be retried on its
        back-off. The text is kube-apiserver's (one cause bare, several in brackets)."""
        name = job["metadata"]["name"]
        listed = [f"{path}: {message}" for path, message in issues]
        causes = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
        message = f'job "{name}" creation failed with error: Job.batch "{name}" is invalid: {causes}'
        if self.c.creation_failures.get(self.jobset["metadata"]["uid"]) != message:
            self.c.creation_failures[self.jobset["metadata"]["uid"]] = message
            record_events(self.store, [(self.jobset, "Warning", "JobCreationFailed", message, COMPONENT)])
        raise JobCreationError(message)

    def unchanged(self) -> bool:
        """The JobSet is still the one this pass read (not deleted, replaced or edited)."""
        current = self.store.get(JOBSETS.key, self.namespace, self.name)
        return (
            current is not None
            and current["metadata"]["uid"] == self.jobset["metadata"]["uid"]
            and not current["metadata"].get("deletionTimestamp")
            and current.get("spec") == self.jobset.get("spec")
        )

    def suspend_or_resume_job(self, job: Unstructured) -> None:
        suspend = bool(self.jobset["spec"].get("suspend"))
        if bool(job["spec"].get("suspend")) != suspend:
            current = self.store.get(JOBS.key, self.namespace, job["metadata"]["name"])
            if current is None:
                return
            if not suspend:  # ``resumeJob``: what may change while suspended reaches the Job
                rjob = (current["metadata"].get("labels") or {}).get(js.REPLICATED_JOB_NAME, "")
                merge_mutable(current["spec"].setdefault("template", {}), self.templates().get(rjob) or {})
            current["spec"]["suspend"] = suspend
            self.store.update(JOBS.key, current)  # (a Conflict: the pass runs again)

    def templates(self) -> dict[str, dict[str, Any]]:
        """Each replicated Job's pod template as this JobSet now says (localized), read once a pass."""
        if self._templates is None:
            self._templates = {
                str(r.get("name")): ((r.get("template") or {}).get("spec") or {}).get("template") or {}
                for r in localize(self.jobset["spec"].get("replicatedJobs") or [], self.jobset, self.c.network)
            }
        return self._templates

    def suspended_condition(self) -> None:
        suspend = bool(self.jobset["spec"].get("suspend"))
        if suspend:
            if _set(self.conditions, js.SUSPENDED, self.now):
                self.events.append(("Normal", js.SUSPENDED[2], js.SUSPENDED[3]))
            _set(self.conditions, ("RestartingJobSet", "False", "JobSetSuspended", "jobset is suspended"), self.now)
        elif find(self.conditions, "Suspended") is not None and _set(self.conditions, js.RESUMED, self.now):
            self.events.append(("Normal", js.RESUMED[2], js.RESUMED[3]))

    def save(self) -> float | None:
        if not self.conditions:
            self.status.pop("conditions", None)
        obj = self.jobset
        if self.status != self.before:
            current = self.store.get(JOBSETS.key, self.namespace, self.name)
            if current is None or current["metadata"]["uid"] != self.jobset["metadata"]["uid"]:
                return None
            if current.get("spec") != self.jobset.get("spec"):
                raise ConflictError(self.name)
            current["status"] = self.status
            obj = self.store.update(JOBSETS.key, current)  # (a Conflict: the pass runs again)
        record_events(self.store, [(obj, type_, reason, message, COMPONENT) for type_, reason, message in self.events])
        return self.requeue
