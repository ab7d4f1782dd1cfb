"""PyTorchJob (``training-operator.md`` §4.1): env of ``envvar.go`` / ``elastic.go``, init container,
status rules of ``UpdateJobStatus``."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

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
from airflow_provider_training.specs.jobs import PyTorchJob, TrainingJob
from airflow_provider_training.specs.pod import EnvVar

MASTER = "Master"
WORKER = "Worker"

INIT_CONTAINER_NAME = "init-pytorch"
INIT_CONTAINER_IMAGE = "alpine:3.10"
INIT_CONTAINER_MAX_TRIES = 100
# Port name passed to Addressing.port for an explicit elasticPolicy.rdzvPort (no template port has it).
RDZV_PORT_NAME = "rdzv-port"

_GO_ATOI = re.compile(r"^[+-]?[0-9]+$")


def nproc_per_node_int(job: PyTorchJob) -> int:
    """``getNprocPerNodeInt``: the integer value of ``nprocPerNode`` (Go ``Atoi``), otherwise 1."""
    value = job.spec.nproc_per_node
    return int(value) if value is not None and _GO_ATOI.match(value) else 1


class PyTorchPlugin(FrameworkPlugin):
    info = kinds.PYTORCH

    def is_master_role(self, job: TrainingJob, rtype: str, index: int) -> bool:
        if MASTER in job.replica_specs:
            return rtype == MASTER
        return rtype == WORKER and index == 0

    def injected_env(
        self,
        job: TrainingJob,
        rtype: str,
        index: int,
        container_name: str,
        addressing: Addressing = CLUSTER,
    ) -> list[EnvVar]:
        assert isinstance(job, PyTorchJob)
        total = total_replicas(job)
        out = [env("PYTHONUNBUFFERED", "1")]
        if MASTER in job.replica_specs:
            port = str(port_of(self, job, MASTER, 0, addressing))
            host = address(self, job, MASTER, 0, addressing)
            rank = str(index + 1 if rtype == WORKER else index)
            out += [
                env("MASTER_PORT", port),
                env("PET_MASTER_PORT", port),
                env("MASTER_ADDR", host),
                env("PET_MASTER_ADDR", host),
                env("WORLD_SIZE", str(total * nproc_per_node_int(job))),
                env("RANK", rank),
                env("PET_NODE_RANK", rank),
            ]
        if job.spec.nproc_per_node is not None:
            out.append(env("PET_NPROC_PER_NODE", job.spec.nproc_per_node))
        if job.spec.elastic_policy is not None:
            out += self._elastic_env(job, addressing)
        else:
            out.append(env("PET_NNODES", str(total)))
        return out

    def _elastic_env(self, job: PyTorchJob, addressing: Addressing) -> list[EnvVar]:
        policy = job.spec.elastic_policy
        assert policy is not None
        # An explicit rdzvHost is the user's own name and is passed through as written.
        host = policy.rdzv_host if policy.rdzv_host is not None else address(self, job, WORKER, 0, addressing)
        if policy.rdzv_port is not None:
            port = addressing.port(self.replica_ref(job, WORKER, 0), RDZV_PORT_NAME, policy.rdzv_port)
        else:
            port = port_of(self, job, WORKER, 0, addressing)
        out = [
            env("PET_RDZV_ENDPOINT", f"{host}:{port}"),
            env("PET_RDZV_BACKEND", policy.rdzv_backend or "c10d"),
            env("PET_NNODES", self._nnodes(job)),
        ]
        if policy.max_restarts is not None:
            out.append(env("PET_MAX_RESTARTS", str(policy.max_restarts)))
        if policy.n_proc_per_node is not None:
            out.append(env("PET_NPROC_PER_NODE", str(policy.n_proc_per_node)))
        if policy.rdzv_id is not None:
            out.append(env("PET_RDZV_ID", policy.rdzv_id))
        if policy.rdzv_conf:
            out.append(env("PET_RDZV_CONF", ",".join(f"{c.key or ''}={c.value or ''}" for c in policy.rdzv_conf)))
        if policy.standalone:
            out.append(env("PET_STANDALONE", ""))
        return out

    @staticmethod
    def _nnodes(job: PyTorchJob) -> str:
        policy = job.spec.elastic_policy
        assert policy is not None
        if policy.min_replicas is not None and policy.max_replicas is not None:
            return f"{policy.min_replicas}:{policy.max_replicas}"
        worker = job.replica_specs.get(WORKER)
        return str(worker.replicas if worker is not None else 0)

    def extra_init_containers(
        self, job: TrainingJob, rtype: str, index: int, addressing: Addressing = CLUSTER
    ) -> list[dict[str, Any]]:
        """``init-pytorch`` on Worker pods when a Master exists: waits until the master's name resolves.

        The embedded node agent recognises it by name (:data:`INIT_CONTAINER_NAME`); the name it
        looks up goes through ``addressing`` like every other address.
        """
        if MASTER not in job.replica_specs or rtype != WORKER:
            return []
        master = address(self, job, MASTER, 0, addressing)
        script = (
            f"err=1;for i in $(seq {INIT_CONTAINER_MAX_TRIES}); do if nslookup {master}; then err=0 && break; "
            "fi;echo waiting for master; sleep 2; done; exit $err"
        )
        return [
            {
                "name": INIT_CONTAINER_NAME,
                "image": INIT_CONTAINER_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "resources": {
                    "limits": {"cpu": "100m", "memory": "20Mi"},
                    "requests": {"cpu": "50m", "memory": "10Mi"},
                },
                "command": ["sh", "-c", script],
            }
        ]

    def update_status(self, job: TrainingJob, status: JobStatus, pods: list[PodState], now: datetime) -> StatusUpdate:
        assert isinstance(job, PyTorchJob)
        return master_worker_status(self, job, status, now, elastic_any_worker=job.spec.elastic_policy is not None)


def master_worker_status(
    plugin: FrameworkPlugin, job: TrainingJob, status: JobStatus, now: datetime, elastic_any_worker: bool
) -> StatusUpdate:
    """PyTorchJob's ``UpdateJobStatus``; PaddleJob's is the same without the elastic rule."""
    kind, name, ns = plugin.info.kind, job.name, job.namespace
    rec = Recorder(kind, status, now)
    ensure_start_time(status, now)
    with_master = MASTER in job.replica_specs
    for rtype in plugin.replica_types(job):
        t = tally(job, status, rtype)
        if with_master:
            if rtype == MASTER:
                if t.active > 0:
                    rec.running(f"{kind} {name} is running.")
                if t.expected == 0:
                    rec.succeeded(f"{kind} {name} is successfully completed.")
                    return rec.result()
        elif rtype == WORKER:
            if t.expected == 0 or (elastic_any_worker and t.succeeded > 0):
                rec.succeeded(f"{kind} {ns}/{name} successfully completed.")
            elif t.active > 0:
                rec.running(f"{kind} {ns}/{name} is running.")
        if t.failed > 0 and t.replicas > t.succeeded + t.active:
            if t.spec.restart_policy != "Never":
                rec.restarting(f"{kind} {name} is restarting because {t.failed} {rtype} replica(s) failed.")
            else:
                rec.failed(f"{kind} {name} is failed because {t.failed} {rtype} replica(s) failed.")
    return rec.result()
