"""MPIJob: the launcher's real ``mpirun`` (Debian's OpenMPI) starts ranks in the worker pods
through ``kubexec.sh`` and the ``kubectl`` the node agent delivers; the ranks do an allreduce."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.controllers.jobs import Jobs, conditions, wait_for

RANK = (
    "import os; from mpi4py import MPI; c = MPI.COMM_WORLD; "
    "print(f'rank {c.rank}/{c.size} pod={os.environ[\"HOSTNAME\"]} sum={c.allreduce(c.rank + 1)}', flush=True)"
)


def test_mpirun_runs_an_allreduce_across_the_worker_pods(kube_api: Any, test_namespace: str) -> None:
    pytest.importorskip("mpi4py")
    jobs = Jobs(kube_api, test_namespace)
    worker = {"name": "mpi", "image": "mpioperator/openmpi"}
    launcher = {
        "name": "mpi",
        "image": "mpioperator/openmpi",
        "command": ["mpirun", "-np", "2", sys.executable, "-c", RANK],
    }
    jobs.create(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MPIJob",
            "metadata": {"name": "allreduce"},
            "spec": {
                "slotsPerWorker": 1,
                "runPolicy": {"cleanPodPolicy": "Running"},
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": {"spec": {"containers": [launcher]}}},
                    "Worker": {"replicas": 2, "template": {"spec": {"containers": [worker]}}},
                },
            },
        }
    )
    done = jobs.wait("MPIJob", "allreduce", "Succeeded", timeout=60)
    assert conditions(done)[-1] == (
        "Succeeded",
        "True",
        "MPIJobSucceeded",
        "MPIJob allreduce is successfully completed.",
    )
    lines = sorted(line for line in jobs.logs("allreduce-launcher").splitlines() if line.startswith("rank "))
    # Each rank ran in its worker pod (HOSTNAME is the pod's), and the allreduce summed 1 + 2.
    assert lines == ["rank 0/2 pod=allreduce-worker-0 sum=3", "rank 1/2 pod=allreduce-worker-1 sum=3"]
    config = jobs.core.read_namespaced_config_map("allreduce-config", test_namespace)
    hosts = [line.split()[0] for line in config.data["hostfile"].splitlines()]
    assert config.data["hostfile"] == "".join(f"{h} slots=1\n" for h in hosts)
    assert len(set(hosts)) == 2 and all(h.startswith("127.") for h in hosts)  # the workers' own addresses
    wait_for(
        lambda: not [p for p in jobs.pods("allreduce") if p.metadata.name != "allreduce-launcher"],
        15,
        "cleanPodPolicy Running to remove the sleeping workers",
    )


WATCH_HOSTS = """
import time
path, seen = '/etc/mpi/discover_hosts.sh', None
deadline = time.time() + 30
while time.time() < deadline:
    hosts = [l.split()[1] for l in open(path).read().splitlines() if l.startswith('echo ')]
    if hosts != seen:
        seen = hosts
        print(f'hosts {len(hosts)} {" ".join(hosts)}', flush=True)
    if len(hosts) == 2:
        raise SystemExit(0)
    time.sleep(0.05)
raise SystemExit(1)
"""


def test_a_running_launcher_sees_discover_hosts_follow_the_worker_set(kube_api: Any, test_namespace: str) -> None:
    jobs = Jobs(kube_api, test_namespace)
    sleeper = {
        "name": "mpi",
        "image": "mpioperator/openmpi",
        "command": [sys.executable, "-c", "import time; time.sleep(60)"],
    }
    launcher = {"name": "mpi", "image": "mpioperator/openmpi", "command": [sys.executable, "-c", WATCH_HOSTS]}
    jobs.create(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MPIJob",
            "metadata": {"name": "grow"},
            "spec": {
                "slotsPerWorker": 1,
                "runPolicy": {"cleanPodPolicy": "Running"},
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": {"spec": {"containers": [launcher]}}},
                    "Worker": {"replicas": 1, "template": {"spec": {"containers": [sleeper]}}},
                },
            },
        }
    )
    wait_for(lambda: "hosts 1 " in _logs(jobs, "grow-launcher"), 20, "the launcher to see one worker")
    jobs.patch("MPIJob", "grow", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 2}}}})
    jobs.wait("MPIJob", "grow", "Succeeded", timeout=30)
    lines = [line for line in jobs.logs("grow-launcher").splitlines() if line.startswith("hosts ")]
    assert lines[-1].startswith("hosts 2 ") and len(set(lines[-1].split()[2:])) == 2, lines


def _logs(jobs: Jobs, pod: str) -> str:
    try:
        return jobs.logs(pod)
    except Exception:
        return ""
