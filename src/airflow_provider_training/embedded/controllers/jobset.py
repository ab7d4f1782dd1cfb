"""The JobSet controller (JobSet v0.12.0, ``jobset.x-k8s.io/v1alpha2``) on the controller runtime.

The decisions are ``frameworks.trainer.jobset``'s (child Jobs with JobSet's names, labels and
annotations, ``replicatedJobsStatus``, success policy, failure policy with ``maxRestarts``,
``dependsOn``, ``startupPolicy: InOrder``); this module does the I/O in upstream's order of a pass:
finished → delete active Jobs; a failed Job → the failure policy (fail, or restart: delete every
Job of the old attempt and create new ones); success policy; the headless Service; create Jobs;
suspend or resume them. Child Jobs are Indexed (run by ``indexedjobs.py``).

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
from datetime import UTC, datetime
from typing import Any

from airflow_provider_training.embedded import runtime
from airflow_provider_training.embedded.controllers.indexedjobs import address_key
from airflow_provider_training.embedded.events import record_event
from airflow_provider_training.embedded.network import Network, shared_network
from airflow_provider_training.embedded.resources import BY_KEY
from airflow_provider_training.embedded.runtime import ControllerContext, For, Owns, WorkQueue
from airflow_provider_training.embedded.store import AlreadyExistsError, ConflictError, NotFoundError, Store, WatchEvent
from airflow_provider_training.frameworks.trainer import jobset as js
from airflow_provider_training.frameworks.trainer.status import find, set_condition
from airflow_provider_training.specs.annotations import WORKING_DIR_ANNOTATION
from airflow_provider_training.specs.unstructured import controller_ref

log = logging.getLogger(__name__)
JOBSETS = BY_KEY["jobset.x-k8s.io/jobsets"]
JOBS = BY_KEY["batch/jobs"]
SERVICES = BY_KEY["core/services"]
COMPONENT = "jobset-controller"
MANAGED_BY = "jobset.sigs.k8s.io/jobset-controller"
Key = runtime.controller.Key


def pod_hostnames(jobset: dict[str, Any]) -> list[str]:
    """Every pod hostname the JobSet's Jobs will have: ``<js>-<rjob>-<jobIdx>-<podIdx>``."""
    out = []
    name = jobset["metadata"]["name"]
    for rjob in jobset["spec"].get("replicatedJobs") or []:
        spec = (rjob.get("template") or {}).get("spec") or {}
        pods = int(spec.get("completions") or spec.get("parallelism") or 1)
        for j in range(int(rjob.get("replicas", 1))):
            out += [f"{js.job_name(name, rjob['name'], j)}-{p}" for p in range(pods)]
    return out


def localize(value: Any, jobset: dict[str, Any], network: Network) -> Any:
    """``value`` (any JSON) with every ``<hostname>.<subdomain>`` of the JobSet's pods replaced by
    the loopback address reserved for that hostname."""
    namespace = jobset["metadata"].get("namespace", "default")
    subdomain = js.subdomain(jobset)
    text = json.dumps(value)
    for hostname in sorted(pod_hostnames(jobset), key=len, reverse=True):
        fqdn = f"{hostname}.{subdomain}"
        if fqdn in text:
            text = text.replace(fqdn, network.pod_address(namespace, address_key(hostname)))
    return json.loads(text)


def release(jobset: dict[str, Any], network: Network) -> None:
    namespace = jobset["metadata"].get("namespace", "default")
    for hostname in pod_hostnames(jobset):
        network.release_pod(namespace, address_key(hostname))


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


class JobSetController:
    name = "jobsets"
    sources = (
        For(JOBSETS.key),
        Owns(JOBS.key, owner=JOBSETS.key, kind="JobSet", api_version="jobset.x-k8s.io/v1alpha2"),
    )

    def __init__(self) -> None:
        self.work: WorkQueue[Key] = WorkQueue()

    async def run(self, ctx: ControllerContext) -> None:
        self.store: Store = ctx.store
        self.network = shared_network(ctx.home)
        await runtime.run(self, ctx, self.work, on_event=self._on_event)

    def _on_event(self, event: WatchEvent) -> None:
        if event.type == "DELETED" and event.resource == JOBSETS.key:
            with contextlib.suppress(KeyError, TypeError):
                release(event.object, self.network)

    def reconcile(self, key: Key) -> float | None:
        namespace, name = key.namespace, key.name
        obj = self.store.get(JOBSETS.key, namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return None
        if (obj.get("spec") or {}).get("managedBy", MANAGED_BY) != MANAGED_BY:
            return None
        return JobSetPass(self, obj).run()

    def owned_jobs(self, jobset: dict[str, Any]) -> list[dict[str, Any]]:
        return self.store.list_controlled(JOBS.key, jobset, label_equals=[(js.JOBSET_NAME, jobset["metadata"]["name"])])

    def delete_tree(self, resource: str, obj: dict[str, Any]) -> bool:
        """Foreground deletion: dependents (a Job's pods) first, then the object."""
        meta = obj["metadata"]
        for dep_resource, dep_ns, dep_name in self.store.dependents(meta["uid"]):
            with contextlib.suppress(NotFoundError):
                self.store.delete(dep_resource, dep_ns, dep_name)
        try:
            self.store.delete(resource, meta.get("namespace", ""), meta["name"], uid=meta["uid"])
        except NotFoundError:
            return False
        return True


class JobSetPass:
    def __init__(self, c: JobSetController, jobset: dict[str, Any]) -> None:
        self.c, self.store = c, c.store
        self.jobset = jobset
        self.namespace, self.name = jobset["metadata"]["namespace"], jobset["metadata"]["name"]
        self.status: dict[str, Any] = copy.deepcopy(jobset.get("status") or {})
        self.before = copy.deepcopy(self.status)
        self.conditions: list[dict[str, Any]] = self.status.setdefault("conditions", [])
        self.now = datetime.now(UTC)
        self.events: list[tuple[str, str, str]] = []

    @property
    def view(self) -> dict[str, Any]:
        """The JobSet with this pass's status (what the pure decisions read)."""
        return {**self.jobset, "status": self.status}

    def run(self) -> float | None:
        self.status.setdefault("restarts", 0)
        owned = js.classify(self.view, self.c.owned_jobs(self.jobset))
        for job in owned.previous:  # an earlier attempt's Jobs: foreground deletion
            self.c.delete_tree(JOBS.key, job)
        statuses = js.replicated_jobs_status(self.view, owned)
        self.status["replicatedJobsStatus"] = statuses
        if self.status.get("terminalState"):
            for job in owned.active:
                self.c.delete_tree(JOBS.key, job)
            return self.save()
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
        for job in creation.jobs:
            self.create_job(job)
        if creation.startup_condition is not None:
            _set(self.conditions, creation.startup_condition, self.now)
        self.suspend_or_resume(owned.active)
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

    def owner_reference(self) -> dict[str, Any]:
        return dict(controller_ref(self.jobset, JOBSETS))

    def create_job(self, job: dict[str, Any]) -> None:
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
        spec["template"] = localize(spec["template"], self.jobset, self.c.network)
        try:
            created = self.store.create(JOBS.key, job)
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

    def suspend_or_resume(self, active: list[dict[str, Any]]) -> None:
        suspend = bool(self.jobset["spec"].get("suspend"))
        for job in active:
            if bool(job["spec"].get("suspend")) != suspend:
                current = self.store.get(JOBS.key, self.namespace, job["metadata"]["name"])
                if current is None:
                    continue
                current["spec"]["suspend"] = suspend
                self.store.update(JOBS.key, current, check_rv=False)
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
            obj = self.store.update(JOBSETS.key, current, check_rv=False)
        for type_, reason, message in self.events:
            record_event(self.store, obj, type_, reason, message, COMPONENT)
        return None
