"""JAXJob (``training-operator.md`` §4.7)."""

from __future__ import annotations

from datetime import datetime

from airflow_provider_training.frameworks.addressing import Addressing
from airflow_provider_training.frameworks.base import (
    CLUSTER,
    FrameworkPlugin,
    Recorder,
    StatusUpdate,
    address,
    ensure_start_time,
    env,
    port_of,
    tally,
    total_replicas,
)
from airflow_provider_training.frameworks.pods import PodState
from airflow_provider_training.specs import kinds
from airflow_provider_training.specs.common import JobStatus
from airflow_provider_training.specs.jobs import TrainingJob
from airflow_provider_training.specs.pod import EnvVar

WORKER = "Worker"


class JAXPlugin(FrameworkPlugin):
    info = kinds.JAX

    def is_master_role(self, job: TrainingJob, rtype: str, index: int) -> bool:
        return rtype == WORKER and index == 0

    def injected_env(
        self,
        job: TrainingJob,
        rtype: str,
        index: int,
        container_name: str,
        addressing: Addressing = CLUSTER,
    ) -> list[EnvVar]:
        return [
            env("PYTHONUNBUFFERED", "1"),
            env("COORDINATOR_PORT", str(port_of(self, job, WORKER, 0, addressing))),
            env("COORDINATOR_ADDRESS", address(self, job, WORKER, 0, addressing)),
            env("NUM_PROCESSES", str(total_replicas(job))),
            env("PROCESS_ID", str(index)),
        ]

    def update_status(self, job: TrainingJob, status: JobStatus, pods: list[PodState], now: datetime) -> StatusUpdate:
        kind, name, ns = self.info.kind, job.name, job.namespace
        rec = Recorder(kind, status, now)
        ensure_start_time(status, now)
        for rtype in self.replica_types(job):
            t = tally(job, status, rtype)
            if rtype == WORKER:
                if t.expected == 0:
                    rec.succeeded(f"{kind} {ns}/{name} successfully completed.")
                elif t.active > 0:
                    rec.running(f"{kind} {ns}/{name} is running.")
            if t.failed > 0 and t.replicas > t.succeeded + t.active:
                if t.spec.restart_policy != "Never":
                    rec.restarting(f"{kind} {name} is restarting because {t.failed} {rtype} replica(s) failed.")
                else:
                    rec.failed(f"{kind} {name} is failed because {t.failed} {rtype} replica(s) failed.")
        return rec.result()
