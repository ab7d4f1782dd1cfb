"""XGBoostJob (``training-operator.md`` §4.4)."""

from __future__ import annotations

from datetime import datetime

from airflow_provider_training.frameworks import conditions as cond
from airflow_provider_training.frameworks.addressing import Addressing
from airflow_provider_training.frameworks.base import (
    CLUSTER,
    FrameworkPlugin,
    InjectionError,
    Recorder,
    StatusUpdate,
    address,
    ensure_start_time,
    env,
    port_of,
    replicas,
    tally,
    total_replicas,
)
from airflow_provider_training.frameworks.pods import PodState
from airflow_provider_training.specs import kinds
from airflow_provider_training.specs.common import JobStatus
from airflow_provider_training.specs.jobs import TrainingJob
from airflow_provider_training.specs.pod import EnvVar

MASTER, WORKER = "Master", "Worker"


class XGBoostPlugin(FrameworkPlugin):
    info = kinds.XGBOOST

    def is_master_role(self, job: TrainingJob, rtype: str, index: int) -> bool:
        return rtype == MASTER

    def injected_env(
        self,
        job: TrainingJob,
        rtype: str,
        index: int,
        container_name: str,
        addressing: Addressing = CLUSTER,
    ) -> list[EnvVar]:
        if MASTER not in job.replica_specs:
            raise InjectionError(
                f"XGBoostJob {job.name}: spec.xgbReplicaSpecs[Master] is required (the operator "
                "takes MASTER_ADDR and MASTER_PORT from it)"
            )
        rank = index + replicas(job, MASTER) if rtype == WORKER else index
        total = total_replicas(job)
        out = [
            env("MASTER_PORT", str(port_of(self, job, MASTER, 0, addressing))),
            env("MASTER_ADDR", address(self, job, MASTER, 0, addressing)),
            env("WORLD_SIZE", str(total)),
            env("RANK", str(rank)),
            env("PYTHONUNBUFFERED", "1"),
        ]
        if total > 1:
            # WORKER_PORT is one value for all workers; worker-0's port stands for them.
            out.append(env("WORKER_PORT", str(port_of(self, job, WORKER, 0, addressing))))
            hosts = [address(self, job, WORKER, i, addressing) for i in range(total - 1)]
            out.append(env("WORKER_ADDRS", ",".join(hosts)))
        return out

    def update_status(self, job: TrainingJob, status: JobStatus, pods: list[PodState], now: datetime) -> StatusUpdate:
        rec = Recorder(self.info.kind, status, now)
        ensure_start_time(status, now)
        running_msg = f"XGBoostJob {job.name} is running."

        def set_running_once() -> None:
            # setRunningCondition only adds Running when no Running condition exists at all.
            if cond.find(status, cond.RUNNING) is None:
                rec.running(running_msg)

        for rtype in self.replica_types(job):
            t = tally(job, status, rtype)
            if rtype == MASTER:
                if t.active > 0:
                    set_running_once()
                if t.expected == 0:
                    set_running_once()
                    rec.succeeded(f"XGBoostJob {job.name} is successfully completed.")
                    return rec.result()
            if t.failed > 0:
                set_running_once()
                if t.spec.restart_policy == "ExitCode":
                    rec.restarting(f"XGBoostJob {job.name} is restarting because {t.failed} {rtype} replica(s) failed.")
                else:
                    rec.failed(f"XGBoostJob {job.name} is failed because {t.failed} {rtype} replica(s) failed.")
        return rec.result()
