"""MXJob, v1.8.1 semantics (``training-operator.md`` §4.6): ``MX_CONFIG`` and ``DMLC_*``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

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
from airflow_provider_training.frameworks.pods import PodState
from airflow_provider_training.specs import kinds
from airflow_provider_training.specs.common import JobStatus
from airflow_provider_training.specs.gojson import go_marshal
from airflow_provider_training.specs.jobs import TrainingJob
from airflow_provider_training.specs.pod import EnvVar

SCHEDULER, SERVER, WORKER = "Scheduler", "Server", "Worker"
TUNER_SERVER_KEY = "tuner-server-key"


def is_single_worker(job: TrainingJob) -> bool:
    specs = job.replica_specs
    count = {t: (specs[t].replicas or 0) if t in specs else 0 for t in (SCHEDULER, SERVER, WORKER)}
    return count[WORKER] == 1 and count[SCHEDULER] == 0 and count[SERVER] == 0


class MXPlugin(FrameworkPlugin):
    info = kinds.MXNET

    def is_master_role(self, job: TrainingJob, rtype: str, index: int) -> bool:
        return rtype == SERVER  # sic: upstream marks the Server pods

    def mx_config(self, job: TrainingJob, rtype: str, index: int, addressing: Addressing = CLUSTER) -> dict[str, Any]:
        cluster: dict[str, list[dict[str, Any]]] = {}
        labels: dict[str, str] = {}
        for rt, spec in job.replica_specs.items():
            declared = template_port(job, rt)
            urls = []
            for i in range(spec.replicas or 0):
                ref = self.replica_ref(job, rt, i)
                urls.append(
                    {"url": addressing.host(ref), "port": addressing.port(ref, self.info.default_port_name, declared)}
                )
            cluster[rt.lower()] = urls
            meta = spec.template.metadata if spec.template is not None else None
            labels[rt.lower()] = meta.annotation(TUNER_SERVER_KEY, "") or "" if meta is not None else ""
        return {
            "cluster": dict(sorted(cluster.items())),
            "labels": dict(sorted(labels.items())),
            "task": {"type": rtype.lower(), "index": index},
        }

    def injected_env(
        self,
        job: TrainingJob,
        rtype: str,
        index: int,
        container_name: str,
        addressing: Addressing = CLUSTER,
    ) -> list[EnvVar]:
        config = self.mx_config(job, rtype, index, addressing)
        cluster = config["cluster"]
        root = cluster.get("scheduler") or [{"url": "", "port": 0}]
        out = [
            env("MX_CONFIG", go_marshal(config)),
            env("DMLC_PS_ROOT_PORT", str(root[0]["port"])),
            env("DMLC_PS_ROOT_URI", root[0]["url"]),
            env("DMLC_NUM_SERVER", str(len(cluster.get("server", [])))),
            env("DMLC_NUM_WORKER", str(len(cluster.get("worker", [])))),
            env("DMLC_ROLE", rtype.lower()),
            env("DMLC_USE_KUBERNETES", "1"),
        ]
        if rtype.lower() == "worker":
            out.append(env("DMLC_WORKER_ID", str(index)))
        return out

    def update_status(self, job: TrainingJob, status: JobStatus, pods: list[PodState], now: datetime) -> StatusUpdate:
        rec = Recorder(self.info.kind, status, now)
        ensure_start_time(status, now)
        single = is_single_worker(job)
        for rtype in self.replica_types(job):
            t = tally(job, status, rtype)
            if rtype == SCHEDULER or single:
                if t.active > 0:
                    rec.running(f"MXJob {job.name} is running.")
                if t.expected == 0:
                    rec.succeeded(f"MXJob {job.name} is successfully completed.")
                    return rec.result()
            if t.failed > 0:
                # The lower-case "mxjob" prefix is upstream's wording.
                if t.spec.restart_policy == "ExitCode":
                    rec.restarting(f"mxjob {job.name} is restarting because {t.failed} {rtype} replica(s) failed.")
                else:
                    rec.failed(f"mxjob {job.name} is failed because {t.failed} {rtype} replica(s) failed.")
        return rec.result()
