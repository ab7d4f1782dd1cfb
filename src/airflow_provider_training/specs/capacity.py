"""How many pods an object asks to run at once, and the embedded control plane's cap on one job.

The embedded control plane runs every pod of a job on this one machine, all at once (a training
job's replicas wait for each other, and the node agent starts a job's pods together), so a job of
20,000 nodes is one it could never run: it stalled the whole API while its pods, addresses and
events were written. Admission refuses a job asking for more than ``max_pods_per_job()`` pods at
once (``AIRFLOW_TRAINING_MAX_PODS_PER_JOB``, default 1,000), naming the field; ``airflow-training
validate`` warns about it (the same document is valid for a cluster, which has no such limit).

Why 1,000: it is the size the control plane is measured at (``benchmarks/hardening.py``: creating
and deleting a 1,000-node TrainJob keeps other clients' requests fast), already far more processes
than one machine trains with, and well inside what the node itself can hand out (the ~12,000 ports
below the ephemeral range that replicas get, one loopback address each). Beyond it nothing is
known to work, so it is refused up front rather than found out by a stalled machine.

Counted (pure, from the object as sent):

- a v1 training job (PyTorchJob, TFJob, ...): the sum of its replica types' ``replicas``;
- a TrainJob: ``spec.trainer.numNodes`` (else its runtime's ``mlPolicy.numNodes``, when known);
- a TrainingRuntime / ClusterTrainingRuntime: ``spec.mlPolicy.numNodes``;
- a JobSet: the sum over ``replicatedJobs`` of ``replicas`` x ``parallelism`` (at most ``completions``);
- a batch/v1 Job: ``parallelism`` (at most ``completions``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from airflow_provider_training.specs.issues import Issue, index
from airflow_provider_training.specs.kinds import KINDS

MAX_PODS_PER_JOB = 1000
ENV = "AIRFLOW_TRAINING_MAX_PODS_PER_JOB"
RULE = "embedded-capacity"
TRAINER_GROUP = "trainer.kubeflow.org/"
RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")


def max_pods_per_job() -> int:
    """The cap: ``AIRFLOW_TRAINING_MAX_PODS_PER_JOB`` when it is a positive integer, else 1,000."""
    try:
        value = int(os.environ.get(ENV, MAX_PODS_PER_JOB))
    except ValueError:
        return MAX_PODS_PER_JOB
    return value if value > 0 else MAX_PODS_PER_JOB


@dataclass(frozen=True)
class PodCount:
    pods: int
    path: str  # the field that asks for them (its value is ``value``)
    value: int


def _int(value: Any, default: int) -> int:
    """A count as sent, or ``default`` when it is not a whole number (the schema reports that)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        return default
    return int(value)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _at_once(job_spec: dict[str, Any]) -> int:
    """Pods a batch/v1 Job spec runs at once: ``parallelism`` (default 1), at most ``completions``."""
    parallelism = max(0, _int(job_spec.get("parallelism"), 1))
    completions = job_spec.get("completions")
    if completions is not None:
        parallelism = min(parallelism, max(0, _int(completions, parallelism)))
    return parallelism


def pod_count(obj: dict[str, Any], runtime_num_nodes: int | None = None) -> PodCount | None:
    """How many pods ``obj`` asks to run at once, and the field that says so; None for other kinds.
    ``runtime_num_nodes``: a TrainJob's runtime's ``mlPolicy.numNodes`` (used when it sets none)."""
    kind, api_version = obj.get("kind"), str(obj.get("apiVersion") or "")
    spec = _dict(obj.get("spec"))
    if kind == "Job" and api_version == "batch/v1":
        return PodCount(_at_once(spec), "spec.parallelism", _int(spec.get("parallelism"), 1))
    if kind == "JobSet":
        total, biggest = 0, PodCount(0, "spec.replicatedJobs", 0)
        for i, rjob in enumerate(spec.get("replicatedJobs") or []):
            rjob = _dict(rjob)
            replicas = max(0, _int(rjob.get("replicas"), 1))
            job_spec = _dict(_dict(rjob.get("template")).get("spec"))
            per_job = _at_once(job_spec)
            total += replicas * per_job
            if replicas * per_job > biggest.pods:
                # the factor that asks for more: the Jobs, or the pods of each
                path = index("spec.replicatedJobs", i)
                biggest = (
                    PodCount(replicas * per_job, f"{path}.replicas", replicas)
                    if replicas >= per_job
                    else PodCount(
                        replicas * per_job, f"{path}.template.spec.parallelism", _int(job_spec.get("parallelism"), 1)
                    )
                )
        return PodCount(total, biggest.path, biggest.value)
    if kind == "TrainJob" and api_version.startswith(TRAINER_GROUP):
        nodes = _dict(spec.get("trainer")).get("numNodes")
        if nodes is not None:
            count = _int(nodes, 1)
            return PodCount(count, "spec.trainer.numNodes", count)
        if runtime_num_nodes is not None:
            return PodCount(runtime_num_nodes, "spec.runtimeRef", runtime_num_nodes)
        return PodCount(1, "spec.trainer.numNodes", 1)
    if kind in RUNTIME_KINDS and api_version.startswith(TRAINER_GROUP):
        count = _int(_dict(spec.get("mlPolicy")).get("numNodes"), 1)
        return PodCount(count, "spec.mlPolicy.numNodes", count)

    info = KINDS.get(str(kind))
    if info is None or not api_version.startswith("kubeflow.org/"):
        return None
    replica_specs = _dict(spec.get(info.replica_specs_field))
    total, biggest = 0, PodCount(0, f"spec.{info.replica_specs_field}", 0)
    for rtype, replica in replica_specs.items():
        replicas = max(0, _int(_dict(replica).get("replicas"), 1))
        total += replicas
        if replicas > biggest.value:
            biggest = PodCount(replicas, f"{index('spec.' + info.replica_specs_field, rtype)}.replicas", replicas)
    return PodCount(total, biggest.path, biggest.value)


def too_many_pods(obj: dict[str, Any], runtime_num_nodes: int | None = None, limit: int | None = None) -> Issue | None:
    """The finding when ``obj`` asks for more pods at once than the embedded control plane runs
    for one job (a ``provider`` issue: a cluster would take it)."""
    limit = max_pods_per_job() if limit is None else limit
    count = pod_count(obj, runtime_num_nodes)
    if count is None or count.pods <= limit:
        return None
    what = obj.get("kind")
    runtime = " (from its runtime's spec.mlPolicy.numNodes)" if count.path == "spec.runtimeRef" else ""
    message = (
        f"Invalid value: {count.value}: this {what} would run {count.pods} pods at once{runtime}, and the "
        f"embedded control plane runs at most {limit} pods for one job, all on this machine: ask for fewer, "
        f"or raise the limit with {ENV} in the daemon's environment (a cluster has no such limit)"
    )
    return Issue(count.path, message, "provider", RULE)
