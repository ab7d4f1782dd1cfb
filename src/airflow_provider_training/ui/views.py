"""What the cockpit shows, computed from API objects (pure functions over dicts, no I/O).

Only fields a person needs to see a job are copied out: never ``env``, ``envFrom``, volumes'
sources or anything else that may carry a secret.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_training.client.state import job_state, main_container, replica_failure, replica_of
from airflow_provider_training.specs.kinds import KINDS

GPU = "nvidia.com/gpu"
Obj = dict[str, Any]


def default_container(kind: str) -> str | None:
    info = KINDS.get(kind)
    return info.default_container if info else None


def _gpus(container: Obj) -> int:
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        value = (resources.get(section) or {}).get(GPU)
        if value is not None:
            try:
                return int(str(value))
            except ValueError:
                return 0
    return 0


def replica_specs(job: Obj) -> dict[str, Obj]:
    spec = job.get("spec") or {}
    for key, value in spec.items():
        if key.endswith("ReplicaSpecs") and isinstance(value, dict):
            return value
    return {}


def spec_summary(job: Obj) -> Obj:
    """Replica types with their count, images, restart policy and GPUs; the run policy."""
    kind = str(job.get("kind") or "")
    replicas = []
    for rtype, rspec in replica_specs(job).items():
        pod_spec = ((rspec or {}).get("template") or {}).get("spec") or {}
        containers = pod_spec.get("containers") or []
        main = next(
            (c for c in containers if c.get("name") == default_container(kind)), containers[0] if containers else {}
        )
        replicas.append(
            {
                "type": rtype,
                "replicas": int(rspec.get("replicas") or 1),
                "restart_policy": rspec.get("restartPolicy") or "",
                "image": main.get("image") or "",
                "gpus": _gpus(main),
            }
        )
    spec = job.get("spec") or {}
    run_policy = spec.get("runPolicy") or {}
    summary: Obj = {
        "replicas": replicas,
        "run_policy": {
            k: run_policy[k]
            for k in ("cleanPodPolicy", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished", "suspend")
            if k in run_policy
        },
    }
    if "elasticPolicy" in spec:
        elastic = spec["elasticPolicy"] or {}
        summary["elastic_policy"] = {
            k: elastic[k] for k in ("minReplicas", "maxReplicas", "nProcPerNode") if k in elastic
        }
    if "nprocPerNode" in spec:
        summary["nproc_per_node"] = spec["nprocPerNode"]
    return summary


def conditions(job: Obj) -> list[Obj]:
    """The status conditions as a timeline (oldest first)."""
    rows = [
        {
            "type": c.get("type"),
            "status": str(c.get("status")),
            "reason": c.get("reason") or "",
            "message": c.get("message") or "",
            "time": c.get("lastTransitionTime") or c.get("lastUpdateTime") or "",
        }
        for c in (job.get("status") or {}).get("conditions") or []
        if isinstance(c, dict)
    ]
    return sorted(rows, key=lambda r: str(r["time"]))


def _phase(job: Obj, state: Any) -> str:
    """The job's phase as a person reads it. A running TrainJob has no condition at all (Trainer v2
    sets only Complete / Failed / Suspended): it runs while a Job of its JobSet is active."""
    if job.get("kind") == "TrainJob" and state.phase == "Pending":
        jobs = (job.get("status") or {}).get("jobsStatus") or []
        if any(isinstance(j, dict) and int(j.get("active") or 0) > 0 for j in jobs):
            return "Running"
    return str(state.phase)


def job_view(job: Obj) -> Obj:
    meta = job.get("metadata") or {}
    status = job.get("status") or {}
    state = job_state(job)
    view: Obj = {
        "kind": job.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "created": meta.get("creationTimestamp"),
        "started": status.get("startTime"),
        "completed": status.get("completionTime"),
        "phase": _phase(job, state),
        "finished": state.finished,
        "succeeded": state.succeeded,
        "reason": state.reason,
        "message": state.message,
        "conditions": conditions(job),
        "spec": spec_summary(job),
        "replica_statuses": status.get("replicaStatuses") or {},
    }
    # Kubeflow Trainer v2 (TrainJob): progress, ETA and metrics reported by the trainer.
    if isinstance(status.get("trainerStatus"), dict):
        view["trainer_status"] = status["trainerStatus"]
    return view


def _container_status(pod: Obj, container: str | None) -> Obj:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if container is None or cs.get("name") == container:
            return dict(cs)
    return {}


def replica_view(pod: Obj, kind: str) -> Obj:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    rtype, index = replica_of(pod)
    container = main_container(pod, default_container(kind))
    cs = _container_status(pod, container)
    state = cs.get("state") or {}
    current = next(iter(state), "waiting" if cs else "")
    detail = state.get(current) or {}
    terminated = state.get("terminated") or (cs.get("lastState") or {}).get("terminated") or {}
    failure = replica_failure(pod, container)
    containers = spec.get("containers") or []
    main: Obj = next((c for c in containers if c.get("name") == container), {})
    return {
        "pod": meta.get("name"),
        "type": rtype,
        "index": index,
        "container": container,
        "phase": status.get("phase") or "Pending",
        "state": current,
        "reason": detail.get("reason") or status.get("reason") or "",
        "restarts": int(cs.get("restartCount") or 0),
        "exit_code": terminated.get("exitCode"),
        "exit_reason": terminated.get("reason") or "",
        "started": (state.get("running") or {}).get("startedAt")
        or terminated.get("startedAt")
        or status.get("startTime"),
        "finished": terminated.get("finishedAt"),
        "node": spec.get("nodeName") or "",
        "gpus": _gpus(main),
        "failed": failure is not None and (status.get("phase") == "Failed" or current == "terminated"),
    }


def replicas_view(pods: list[Obj], kind: str) -> list[Obj]:
    rows = [replica_view(p, kind) for p in pods]
    return sorted(rows, key=lambda r: (str(r["type"]).lower() != "master", str(r["type"]), int(r["index"])))


def event_view(event: Obj) -> Obj:
    involved = event.get("involvedObject") or {}
    return {
        "type": event.get("type") or "Normal",
        "reason": event.get("reason") or "",
        "message": event.get("message") or "",
        "object": f"{involved.get('kind', '')}/{involved.get('name', '')}",
        "count": int(event.get("count") or 1),
        "first": event.get("firstTimestamp") or event.get("eventTime") or "",
        "last": event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or "",
    }


def metrics_replica(pods: list[Obj]) -> Obj | None:
    """Whose log carries the job's metrics: the master-role replica, else the lowest worker."""
    if not pods:
        return None
    for pod in pods:
        if ((pod.get("metadata") or {}).get("labels") or {}).get("training.kubeflow.org/job-role") == "master":
            return pod
    return min(pods, key=lambda p: (replica_of(p)[1], str(replica_of(p)[0])))


def log_page(lines: list[str], tail: int, before: int | None, window: int) -> Obj:
    """``tail`` lines of a container's log (``lines``, its last ``window`` lines as read): the last
    ones, or the ones before line ``before``; ``start`` is the first one's number (from 0), ``total``
    how many there are, ``truncated`` whether the log may have more than the window."""
    total = len(lines)
    end = total if before is None else max(0, min(before, total))
    start = max(0, end - max(0, tail))
    return {"lines": lines[start:end], "start": start, "total": total, "truncated": total >= window}
