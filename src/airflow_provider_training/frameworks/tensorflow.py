"""TFJob (``training-operator.md`` §4.2): ``TF_CONFIG`` byte for byte, and the TF status rules."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow_provider_training.frameworks import conditions as cond
from airflow_provider_training.frameworks.addressing import Addressing
from airflow_provider_training.frameworks.base import (
    CLUSTER,
    FrameworkPlugin,
    Recorder,
    StatusUpdate,
    ensure_start_time,
    env,
    tally,
    template_port,
)
from airflow_provider_training.frameworks.pods import SUCCEEDED, PodState, of_type
from airflow_provider_training.specs import kinds
from airflow_provider_training.specs.common import JobStatus
from airflow_provider_training.specs.gojson import go_marshal
from airflow_provider_training.specs.jobs import TFJob, TrainingJob
from airflow_provider_training.specs.pod import EnvVar

CHIEF, EVALUATOR, MASTER, PS, WORKER = "Chief", "Evaluator", "Master", "PS", "Worker"
# UpdateJobStatus and isDistributed walk the types in this fixed order.
STATUS_ORDER = (CHIEF, EVALUATOR, MASTER, PS, WORKER)


def is_distributed(job: TFJob) -> bool:
    """TF_CONFIG is only set when the replicas over the five known types do not add up to 1."""
    specs = job.replica_specs
    count = 0
    for rtype in STATUS_ORDER:
        if rtype in specs:
            n = specs[rtype].replicas
            count += 1 if n is None else n
    return count != 1


class TFPlugin(FrameworkPlugin):
    info = kinds.TENSORFLOW

    def is_master_role(self, job: TrainingJob, rtype: str, index: int) -> bool:
        if CHIEF in job.replica_specs or MASTER in job.replica_specs:
            return rtype in (CHIEF, MASTER)
        return rtype == WORKER and index == 0

    def replica_types(self, job: TrainingJob) -> list[str]:
        known = [t for t in STATUS_ORDER if t in job.replica_specs]
        return known + sorted(t for t in job.replica_specs if t not in known)

    def cluster_spec(self, job: TFJob, addressing: Addressing) -> dict[str, list[str]]:
        """``genClusterSpec``: every type of the spec, lower-cased, keys sorted (Go map order)."""
        cluster: dict[str, list[str]] = {}
        for rtype, spec in job.replica_specs.items():
            declared = template_port(job, rtype, fallback=self.info.default_port)
            entries = []
            for i in range(spec.replicas or 0):
                ref = self.replica_ref(job, rtype, i)
                port = addressing.port(ref, self.info.default_port_name, declared)
                entries.append(f"{addressing.service_host(ref)}:{port}")
            cluster[rtype.lower()] = entries
        return dict(sorted(cluster.items()))

    def tf_config(self, job: TFJob, rtype: str, index: int, addressing: Addressing = CLUSTER) -> str:
        cluster = self.cluster_spec(job, addressing)
        rt = rtype.lower()
        task = {"type": rt, "index": index}
        if not job.spec.enable_dynamic_worker:
            return go_marshal({"cluster": cluster, "task": task, "environment": "cloud"})
        # SparseClusterSpec: struct order worker, ps; worker is a map[int32]string (string keys).
        workers: dict[str, str] = {}
        ps: list[str] | None = []
        if rt == "ps":
            ps = [cluster["ps"][index]]
        elif rt == "worker":
            ps = cluster.get("ps")  # nil (JSON null) when the job has no PS
            workers[str(index)] = cluster["worker"][index]
        sparse: dict[str, Any] = {"worker": workers, "ps": ps}
        return go_marshal({"cluster": sparse, "task": task})

    def injected_env(
        self,
        job: TrainingJob,
        rtype: str,
        index: int,
        container_name: str,
        addressing: Addressing = CLUSTER,
    ) -> list[EnvVar]:
        assert isinstance(job, TFJob)
        if container_name != self.info.default_container or not is_distributed(job):
            return []
        return [env("TF_CONFIG", self.tf_config(job, rtype, index, addressing))]

    def update_status(self, job: TrainingJob, status: JobStatus, pods: list[PodState], now: datetime) -> StatusUpdate:
        assert isinstance(job, TFJob)
        name = f"{job.namespace}/{job.name}"
        rec = Recorder(self.info.kind, status, now)
        worker0_done = any(p.index == 0 and p.phase == SUCCEEDED and p.exit_code == 0 for p in of_type(pods, WORKER))
        ensure_start_time(status, now)
        chief_or_master = CHIEF in job.replica_specs or MASTER in job.replica_specs
        for rtype in [t for t in STATUS_ORDER if t in job.replica_specs]:
            t = tally(job, status, rtype)
            if chief_or_master:
                if rtype in (CHIEF, MASTER):
                    if t.active > 0:
                        rec.running(f"TFJob {name} is running.")
                    if t.expected == 0:
                        rec.succeeded(f"TFJob {name} successfully completed.")
            elif rtype == WORKER:
                if t.expected == 0 or (worker0_done and job.spec.success_policy != "AllWorkers"):
                    rec.succeeded(f"TFJob {name} successfully completed.")
                elif t.active > 0:
                    rec.running(f"TFJob {name} is running.")
            if t.failed > 0:
                restarting = cond.find(status, cond.RESTARTING)
                if restarting is not None:
                    # A Restarting condition set earlier (e.g. by the pod-restart branch) means the
                    # failure is being retried: re-apply it rather than failing the job.
                    cond.set_condition(
                        status, cond.RESTARTING, cond.TRUE, restarting.reason or "", restarting.message or "", now
                    )
                elif job.spec.enable_dynamic_worker and rtype == WORKER:
                    continue
                else:
                    rec.failed(f"TFJob {name} has failed because {t.failed} {rtype} replica(s) failed.")
        return rec.result()
