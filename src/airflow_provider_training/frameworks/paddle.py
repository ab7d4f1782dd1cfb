"""PaddleJob (``training-operator.md`` §4.5): collective mode (no Master) and PS mode."""

from __future__ import annotations

from datetime import datetime

from airflow_provider_training.frameworks.addressing import Addressing
from airflow_provider_training.frameworks.base import (
    CLUSTER,
    FrameworkPlugin,
    StatusUpdate,
    address,
    env,
    port_of,
    total_replicas,
)
from airflow_provider_training.frameworks.pods import PodState
from airflow_provider_training.frameworks.pytorch import master_worker_status
from airflow_provider_training.specs import kinds
from airflow_provider_training.specs.common import JobStatus
from airflow_provider_training.specs.jobs import TrainingJob
from airflow_provider_training.specs.pod import EnvVar

MASTER, WORKER = "Master", "Worker"
POD_IP_VAR = "POD_IP_DUMMY"


class PaddlePlugin(FrameworkPlugin):
    info = kinds.PADDLE

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
        out = [
            env("PYTHONUNBUFFERED", "1"),
            env("PADDLE_JOB_ID", job.name),
            env("PADDLE_NNODES", str(total_replicas(job))),
        ]
        ps_mode = MASTER in job.replica_specs
        endpoint_type = MASTER if ps_mode else WORKER
        port = port_of(self, job, endpoint_type, 0, addressing, fallback=self.info.default_port)
        is_endpoint = index == 0 and (rtype == MASTER or not ps_mode)
        if is_endpoint:
            # The endpoint announces its own pod IP through dependent-variable expansion (§7).
            out.append(EnvVar(name=POD_IP_VAR, value_from={"fieldRef": {"fieldPath": "status.podIP"}}))
            out.append(env("PADDLE_MASTER", f"$({POD_IP_VAR}):{port}"))
        else:
            out.append(env("PADDLE_MASTER", f"{address(self, job, endpoint_type, 0, addressing)}:{port}"))
        if ps_mode:
            out.append(env("PADDLE_SERVER_NUM", "1") if rtype == MASTER else env("PADDLE_TRAINER_NUM", "1"))
        return out

    def update_status(self, job: TrainingJob, status: JobStatus, pods: list[PodState], now: datetime) -> StatusUpdate:
        return master_worker_status(self, job, status, now, elastic_any_worker=False)
