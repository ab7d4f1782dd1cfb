"""JobSet v0.12.0's controller decisions as pure functions (``trainer-v2.md`` §7): the child Jobs and
headless Service it creates, ``replicatedJobsStatus``, the success and failure policies and
``dependsOn``. An embedded JobSet controller calls these and does the I/O; these never do.

The JobSet passed in has CRD and webhook defaults applied (``replicas``, ``groupName``,
``completionMode``, ``successPolicy``, ``network``…).
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME = PREFIX + "jobset-name"
JOBSET_UID = PREFIX + "jobset-uid"
REPLICATED_JOB_NAME = PREFIX + "replicatedjob-name"
RESTART_ATTEMPT = PREFIX + "restart-attempt"
REPLICATED_JOB_REPLICAS = PREFIX + "replicatedjob-replicas"
GLOBAL_REPLICAS = PREFIX + "global-replicas"
JOB_INDEX = PREFIX + "job-index"
JOB_KEY = PREFIX + "job-key"
JOB_GLOBAL_INDEX = PREFIX + "job-global-index"
GROUP_NAME = PREFIX + "group-name"
GROUP_REPLICAS = PREFIX + "group-replicas"
JOB_GROUP_INDEX = PREFIX + "job-group-index"
COORDINATOR = PREFIX + "coordinator"

# Conditions (type, status, reason, message) the controller writes.
COMPLETED = ("Completed", "True", "AllJobsCompleted", "jobset completed successfully")
SUSPENDED = ("Suspended", "True", "SuspendedJobs", "jobset is suspended")
RESUMED = ("Suspended", "False", "ResumeJobs", "jobset is resumed")
FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
FAIL_JOBSET_ACTION = ("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action")
REACHED_MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
RESTART_JOBSET_ACTION = ("RestartJobSetFailurePolicyAction", "applying RestartJobSet failure policy action")
RESTART_IGNORING_MAX_ACTION = (
    "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
    "applying RestartJobSetAndIgnoreMaxRestarts failure policy action",
)


def _replicas(rjob: dict[str, Any]) -> int:
    return int(rjob.get("replicas", 1))


def subdomain(jobset: dict[str, Any]) -> str:
    """``GetSubdomain``: ``spec.network.subdomain``, else the JobSet's name."""
    network = jobset.get("spec", {}).get("network") or {}
    return str(network.get("subdomain") or jobset["metadata"]["name"])


def dns_hostnames(jobset: dict[str, Any]) -> bool:
    return bool((jobset.get("spec", {}).get("network") or {}).get("enableDNSHostnames"))


def job_name(jobset_name: str, replicated_job: str, index: int) -> str:
    return f"{jobset_name}-{replicated_job}-{index}"


def job_key(namespace: str, name: str) -> str:
    """``jobHashKey``: SHA-1 (not SHA-256, whatever the comment upstream says) of ``<ns>/<job>``."""
    return hashlib.sha1(f"{namespace}/{name}".encode()).hexdigest()


def _identity(jobset: dict[str, Any], rjob: dict[str, Any], index: int, restarts: int) -> dict[str, str]:
    meta = jobset["metadata"]
    rjobs = jobset["spec"]["replicatedJobs"]
    name = job_name(meta["name"], rjob["name"], index)
    group = str(rjob.get("groupName", "default"))
    before = sum(_replicas(r) for r in rjobs[: rjobs.index(rjob)])
    group_before = sum(_replicas(r) for r in rjobs[: rjobs.index(rjob)] if r.get("groupName", "default") == group)
    out = {
        JOBSET_NAME: meta["name"],
        JOBSET_UID: str(meta.get("uid", "")),
        REPLICATED_JOB_NAME: rjob["name"],
        RESTART_ATTEMPT: str(restarts),
        REPLICATED_JOB_REPLICAS: str(_replicas(rjob)),
        GLOBAL_REPLICAS: str(sum(_replicas(r) for r in rjobs)),
        JOB_INDEX: str(index),
        JOB_KEY: job_key(meta.get("namespace", "default"), name),
        JOB_GLOBAL_INDEX: str(before + index),
        GROUP_NAME: group,
        GROUP_REPLICAS: str(sum(_replicas(r) for r in rjobs if r.get("groupName", "default") == group)),
        JOB_GROUP_INDEX: str(group_before + index),
    }
    coordinator = jobset["spec"].get("coordinator")
    if coordinator is not None:
        out[COORDINATOR] = (
            f"{meta['name']}-{coordinator['replicatedJob']}-{coordinator.get('jobIndex', 0)}-"
            f"{coordinator.get('podIndex', 0)}.{subdomain(jobset)}"
        )
    return out


def construct_job(jobset: dict[str, Any], rjob: dict[str, Any], index: int) -> dict[str, Any]:
    """``constructJob``: the batch/v1 Job ``<jobset>-<replicatedJob>-<index>`` (without owner reference)."""
    meta = jobset["metadata"]
    restarts = int((jobset.get("status") or {}).get("restarts", 0))
    template = copy.deepcopy(rjob.get("template") or {})
    identity = _identity(jobset, rjob, index, restarts)
    job_meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    pod = spec.setdefault("template", {})
    pod_meta = pod.setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **identity}
    pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **identity}
    if dns_hostnames(jobset):
        pod.setdefault("spec", {})["subdomain"] = subdomain(jobset)
    spec["suspend"] = bool(jobset["spec"].get("suspend"))
    _add_claim_volumes(jobset, pod.setdefault("spec", {}))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(meta["name"], rjob["name"], index),
            "namespace": meta.get("namespace", "default"),
            "labels": {**(job_meta.get("labels") or {}), **identity},
            "annotations": {**(job_meta.get("annotations") or {}), **identity},
        },
        "spec": spec,
    }


def _add_claim_volumes(jobset: dict[str, Any], pod: dict[str, Any]) -> None:
    """``volumeClaimPolicies``: a pod mounting a template's name gets PVC ``<name>-<jobset>``."""
    templates = [t for policy in jobset["spec"].get("volumeClaimPolicies") or [] for t in policy.get("templates") or []]
    mounted = {
        m.get("name")
        for group in ("containers", "initContainers")
        for ct in pod.get(group) or []
        for m in ct.get("volumeMounts") or []
    }
    existing = {v.get("name") for v in pod.get("volumes") or []}
    for template in templates:
        name = (template.get("metadata") or {}).get("name")
        if name in mounted and name not in existing:
            claim = f"{name}-{jobset['metadata']['name']}"
            pod.setdefault("volumes", []).append({"name": name, "persistentVolumeClaim": {"claimName": claim}})


def child_jobs(jobset: dict[str, Any]) -> list[dict[str, Any]]:
    """Every Job of the JobSet, in replicatedJob order (ignoring dependsOn and startup order)."""
    return [
        construct_job(jobset, rjob, index)
        for rjob in jobset["spec"]["replicatedJobs"]
        for index in range(_replicas(rjob))
    ]


def headless_service(jobset: dict[str, Any]) -> dict[str, Any]:
    """The Service named like the subdomain: no cluster IP, no ports, selecting the JobSet's pods."""
    network = jobset["spec"].get("network") or {}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": subdomain(jobset), "namespace": jobset["metadata"].get("namespace", "default")},
        "spec": {
            "clusterIP": "None",
            "selector": {JOBSET_NAME: jobset["metadata"]["name"]},
            "publishNotReadyAddresses": bool(network.get("publishNotReadyAddresses", True)),
        },
    }


# --- status ------------------------------------------------------------------------------------


def _condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            found: dict[str, Any] = condition
            return found
    return None


@dataclass
class ChildJobs:
    active: list[dict[str, Any]] = field(default_factory=list)
    successful: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    # Jobs of an earlier restart attempt: the controller deletes them (foreground).
    previous: list[dict[str, Any]] = field(default_factory=list)


def classify(jobset: dict[str, Any], jobs: list[dict[str, Any]]) -> ChildJobs:
    restarts = int((jobset.get("status") or {}).get("restarts", 0))
    out = ChildJobs()
    for job in jobs:
        attempt = int(((job.get("metadata") or {}).get("labels") or {}).get(RESTART_ATTEMPT, "0") or 0)
        if attempt < restarts:
            out.previous.append(job)
        elif _condition(job, "Complete"):
            out.successful.append(job)
        elif _condition(job, "Failed"):
            out.failed.append(job)
        else:
            out.active.append(job)
    return out


def replicated_jobs_status(jobset: dict[str, Any], jobs: ChildJobs) -> list[dict[str, Any]]:
    """``replicatedJobsStatus``: all five counters per replicatedJob, sorted by name (descending, as
    the stored status ends up after upstream's in-place sort)."""
    counts = {
        r["name"]: {"name": r["name"], "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
        for r in jobset["spec"]["replicatedJobs"]
    }

    def bucket(job: dict[str, Any]) -> dict[str, Any] | None:
        return counts.get(((job.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB_NAME, ""))

    for job in jobs.active:
        entry = bucket(job)
        if entry is None:
            continue
        spec, status = job.get("spec") or {}, job.get("status") or {}
        pods = int(spec.get("parallelism", 1))
        if spec.get("completions") is not None and int(spec["completions"]) < pods:
            pods = int(spec["completions"])
        if int(status.get("succeeded", 0)) + int(status.get("ready", 0)) >= pods:
            entry["ready"] += 1
        if int(status.get("active", 0)) > 0:
            entry["active"] += 1
        if spec.get("suspend"):
            entry["suspended"] += 1
    for job in jobs.successful:
        if (entry := bucket(job)) is not None:
            entry["succeeded"] += 1
    for job in jobs.failed:
        if (entry := bucket(job)) is not None:
            entry["failed"] += 1
    return sorted(counts.values(), key=lambda e: e["name"], reverse=True)


def success_policy_met(jobset: dict[str, Any], jobs: ChildJobs) -> bool:
    policy = jobset["spec"].get("successPolicy") or {"operator": "All"}
    targets = policy.get("targetReplicatedJobs") or []

    def targeted(name: str) -> bool:
        return not targets or name in targets

    succeeded = sum(
        1
        for job in jobs.successful
        if targeted(((job.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB_NAME, ""))
    )
    if policy.get("operator") == "Any":
        return succeeded >= 1
    expected = sum(_replicas(r) for r in jobset["spec"]["replicatedJobs"] if targeted(r["name"]))
    return succeeded >= expected


def depends_on_met(rjob: dict[str, Any], statuses: list[dict[str, Any]], jobset: dict[str, Any]) -> bool:
    """Whether ``rjob``'s Jobs may be created: every dependency reached its status."""
    by_name = {s["name"]: s for s in statuses}
    replicas = {r["name"]: _replicas(r) for r in jobset["spec"]["replicatedJobs"]}
    for dependency in rjob.get("dependsOn") or []:
        status = by_name.get(dependency["name"])
        if status is None:
            return False
        if dependency.get("status") == "Complete":
            if status["succeeded"] != replicas.get(dependency["name"], 1):
                return False
        elif status["ready"] + status["failed"] + status["succeeded"] != replicas.get(dependency["name"], 1):
            return False
    return True


@dataclass(frozen=True)
class FailureDecision:
    """What the failure policy does about failed Jobs."""

    action: str  # FailJobSet | RestartJobSet | RestartJobSetAndIgnoreMaxRestarts
    # True: condition Failed=True with ``reason``/``message``. False: restart every Job; condition
    # RestartingJobSet=True with ``reason``/``message`` and a Warning event ``event_reason``.
    failed: bool
    reason: str
    message: str
    first_failed_job: str
    counts_towards_max: bool = False
    event_reason: str = ""


def _failure_time(job: dict[str, Any]) -> str:
    condition = _condition(job, "Failed") or {}
    return str(condition.get("lastTransitionTime", ""))


def _first_failed(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(jobs, key=_failure_time)


def _applies(rule: dict[str, Any], job: dict[str, Any]) -> bool:
    condition = _condition(job, "Failed") or {}
    reasons = rule.get("onJobFailureReasons") or []
    if reasons and condition.get("reason") not in reasons:
        return False
    patterns = rule.get("onJobFailureMessagePatterns") or []
    message = str(condition.get("message", ""))
    if patterns and not any(_search(p, message) for p in patterns):
        return False
    parent = ((job.get("metadata") or {}).get("labels") or {}).get(REPLICATED_JOB_NAME)
    targets = rule.get("targetReplicatedJobs") or []
    return parent is not None and (not targets or parent in targets)


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False  # upstream logs an invalid pattern and skips it


def failure_decision(jobset: dict[str, Any], failed: list[dict[str, Any]]) -> FailureDecision:
    """``executeFailurePolicy`` for a JobSet with at least one failed Job of the current attempt."""
    policy = jobset["spec"].get("failurePolicy")
    if not policy:
        first = _first_failed(failed)["metadata"]["name"]
        return FailureDecision(
            "FailJobSet", True, FAILED_JOBS[0], f"{FAILED_JOBS[1]} (first failed job: {first})", first
        )
    rule: dict[str, Any] | None = None
    matched: dict[str, Any] | None = None
    for candidate in policy.get("rules") or []:
        hits = [job for job in failed if _applies(candidate, job)]
        if hits:
            rule, matched = candidate, _first_failed(hits)
            break
    if matched is None:
        matched = _first_failed(failed)
    first = matched["metadata"]["name"]
    action = rule.get("action", "RestartJobSet") if rule is not None else "RestartJobSet"
    restarting_reason = f"FailurePolicy_{rule.get('name')}" if rule is not None else "DefaultFailurePolicy"
    if action == "FailJobSet":
        reason, message = FAIL_JOBSET_ACTION
        return FailureDecision(action, True, reason, f"{message} (first failed job: {first})", first)
    if action == "RestartJobSetAndIgnoreMaxRestarts":
        return FailureDecision(
            action, False, restarting_reason, f"{RESTART_IGNORING_MAX_ACTION[1]} (first failed job: {first})", first
        )
    counted = int((jobset.get("status") or {}).get("restartsCountTowardsMax", 0))
    if counted >= int(policy.get("maxRestarts", 0)):
        reason, message = REACHED_MAX_RESTARTS
        return FailureDecision(action, True, reason, f"{message} (first failed job: {first})", first)
    message = f"{RESTART_JOBSET_ACTION[1]} (first failed job: {first})"
    return FailureDecision(action, False, restarting_reason, message, first, True, RESTART_JOBSET_ACTION[0])


STARTUP_IN_PROGRESS = (
    "StartupPolicyInProgress",
    "True",
    "InOrderStartupPolicyInProgress",
    "in order startup policy is in progress",
)
STARTUP_COMPLETED = (
    "StartupPolicyCompleted",
    "True",
    "InOrderStartupPolicyCompleted",
    "in order startup policy has completed",
)


@dataclass
class Creation:
    """What ``reconcileReplicatedJobs`` does in one pass."""

    jobs: list[dict[str, Any]] = field(default_factory=list)
    # STARTUP_IN_PROGRESS / STARTUP_COMPLETED under ``startupPolicyOrder: InOrder`` (not while suspended).
    startup_condition: tuple[str, str, str, str] | None = None


def jobs_to_create(jobset: dict[str, Any], owned: ChildJobs, statuses: list[dict[str, Any]]) -> Creation:
    """The Jobs to create now: missing ones, in replicatedJob order, gated by ``dependsOn``, by
    ``startupPolicy: InOrder`` (one replicatedJob at a time until all its Jobs started) and by a
    ``BlockingRecreate`` restart still deleting the previous attempt's Jobs."""
    spec = jobset["spec"]
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    suspended = bool(spec.get("suspend"))
    blocking = (spec.get("failurePolicy") or {}).get("restartStrategy") == "BlockingRecreate"
    existing = {
        (job.get("metadata") or {}).get("name")
        for job in [*owned.active, *owned.successful, *owned.failed, *owned.previous]
    }
    by_name = {s["name"]: s for s in statuses}
    out = Creation()
    seen: list[dict[str, Any]] = []
    for rjob in spec["replicatedJobs"]:
        seen.append(rjob)
        if not depends_on_met(rjob, statuses, {"spec": {"replicatedJobs": seen}}):
            continue
        status = by_name.get(rjob["name"], {"ready": 0, "failed": 0, "succeeded": 0})
        started = status["ready"] + status["failed"] + status["succeeded"] == _replicas(rjob)
        if not suspended and in_order and started:
            continue
        if not (owned.previous and blocking):
            out.jobs += [
                construct_job(jobset, rjob, index)
                for index in range(_replicas(rjob))
                if job_name(jobset["metadata"]["name"], rjob["name"], index) not in existing
            ]
        if not suspended and in_order:
            out.startup_condition = STARTUP_IN_PROGRESS
            return out
    if not suspended and in_order:
        out.startup_condition = STARTUP_COMPLETED
    return out
