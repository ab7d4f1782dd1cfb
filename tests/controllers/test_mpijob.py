"""MPIJob: the launcher's real ``mpirun`` (Debian's OpenMPI) starts ranks in the worker pods
through ``kubexec.sh`` and the ``kubectl`` the node agent delivers; the ranks do an allreduce."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.controllers.jobs import Jobs, conditions
from tests.waiting import wait_for

RANK = (
    "import os; from mpi4py import MPI; c = MPI.COMM_WORLD; "
    "print(f'rank {c.rank}/{c.size} pod={os.environ[\"HOSTNAME\"]} sum={c.allreduce(c.rank + 1)}', flush=True); "
    "print('session', os.environ.get('OMPI_FILE_LOCATION'), flush=True)"
)


def mpijob(name: str, launcher: dict[str, Any], worker: dict[str, Any], workers: int, **worker_pod: Any) -> dict:
    """An MPIJob of one launcher container and ``workers`` pods of one ``worker`` container (plus
    ``worker_pod``'s pod-spec fields), whose workers are removed once the launcher is done."""
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [launcher]}}},
                "Worker": {"replicas": workers, "template": {"spec": {"containers": [worker], **worker_pod}}},
            },
        },
    }


def test_mpirun_runs_an_allreduce_across_the_worker_pods(kube_api: Any, test_namespace: str) -> None:
    pytest.importorskip("mpi4py")
    jobs = Jobs(kube_api, test_namespace)
    worker = {"name": "mpi", "image": "mpioperator/openmpi"}
    launcher = {
        "name": "mpi",
        "image": "mpioperator/openmpi",
        "command": ["mpirun", "-np", "2", sys.executable, "-c", RANK],
    }
    jobs.create(mpijob("allreduce", launcher, worker, 2))
    done = jobs.wait("MPIJob", "allreduce", "Succeeded", timeout=60)
    assert conditions(done)[-1] == (
        "Succeeded",
        "True",
        "MPIJobSucceeded",
        "MPIJob allreduce is successfully completed.",
    )
    log = jobs.logs("allreduce-launcher").splitlines()
    lines = sorted(line for line in log if line.startswith("rank "))
    # Each rank ran in its worker pod (HOSTNAME is the pod's), and the allreduce summed 1 + 2.
    assert lines == ["rank 0/2 pod=allreduce-worker-0 sum=3", "rank 1/2 pod=allreduce-worker-1 sum=3"]
    # Open MPI's session tree is the launcher's own, not the node's shared /tmp where two jobs can
    # meet (its name comes from 16 bits of mpirun's pid)
    uid = jobs.core.read_namespaced_pod("allreduce-launcher", test_namespace).metadata.uid
    sessions = [line.split()[1] for line in log if line.startswith("session ")]
    assert len(sessions) == 2 and all(s.startswith(f"/tmp/ompi-{uid}/") for s in sessions), sessions
    config = jobs.core.read_namespaced_config_map("allreduce-config", test_namespace)
    hosts = [line.split()[0] for line in config.data["hostfile"].splitlines()]
    assert config.data["hostfile"] == "".join(f"{h} slots=1\n" for h in hosts)
    assert len(set(hosts)) == 2 and all(h.startswith("127.") for h in hosts)  # the workers' own addresses
    wait_for(
        lambda: not [p for p in jobs.pods("allreduce") if p.metadata.name != "allreduce-launcher"],
        15,
        "cleanPodPolicy Running to remove the sleeping workers",
    )


READ_PREPARED = (
    "import os; print('prepared', open('/prepared/flag').read().strip(), os.environ['HOSTNAME'], flush=True)"
)


def test_mpirun_starts_once_the_workers_run(kube_api: Any, test_namespace: str) -> None:
    """As upstream's kubectl-delivery, the launcher waits for the hostfile's pods to run: a rank
    never starts in a worker whose init containers are still preparing it (under load, mpirun
    reached workers the node had not started yet)."""
    pytest.importorskip("mpi4py")
    jobs = Jobs(kube_api, test_namespace)
    prepare = {
        "name": "prepare",
        "image": "python:3.11",
        "command": ["sh", "-c", "sleep 1; echo ready > /prepared/flag"],
        "volumeMounts": [{"name": "prepared", "mountPath": "/prepared"}],
    }
    worker = {
        "name": "mpi",
        "image": "mpioperator/openmpi",
        "volumeMounts": [{"name": "prepared", "mountPath": "/prepared"}],
    }
    launcher = {
        "name": "mpi",
        "image": "mpioperator/openmpi",
        "command": ["mpirun", "-np", "2", sys.executable, "-c", READ_PREPARED],
    }
    worker_pod = {"initContainers": [prepare], "volumes": [{"name": "prepared", "emptyDir": {}}]}
    jobs.create(mpijob("prepared", launcher, worker, 2, **worker_pod))
    jobs.wait("MPIJob", "prepared", "Succeeded", timeout=60)
    lines = sorted(line for line in jobs.logs("prepared-launcher").splitlines() if line.startswith("prepared "))
    assert lines == ["prepared ready prepared-worker-0", "prepared ready prepared-worker-1"], lines
    delivery = jobs.core.read_namespaced_pod_log("prepared-launcher", test_namespace, container="kubectl-delivery")
    assert "waiting for the pods of the hostfile to run" in delivery and "the pods of the hostfile run" in delivery


@pytest.mark.parametrize(
    ("daemon", "said"),
    [
        ("exec sleep 1000", "did not connect back to mpirun within 2 s (AIRFLOW_TRAINING_MPI_DAEMON_TIMEOUT)"),
        ("exit 0", "exited with code 0 before it connected back to mpirun"),  # as a daemonized one that died
    ],
    ids=["hangs", "exits"],
)
def test_a_worker_daemon_that_never_calls_back_fails_the_job(
    kube_api: Any, test_namespace: str, tmp_path: Path, daemon: str, said: str
) -> None:
    """mpirun waits for each orted's call back with no limit; the node's exec that started it does not."""
    fake = tmp_path / "bin" / "orted"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\n{daemon}\n")
    fake.chmod(0o755)
    jobs = Jobs(kube_api, test_namespace)
    worker = {
        "name": "mpi",
        "image": "mpioperator/openmpi",
        "env": [{"name": "PATH", "value": f"{fake.parent}:/usr/local/bin:/usr/bin:/bin"}],
    }
    launcher = {
        "name": "mpi",
        "image": "mpioperator/openmpi",
        "command": ["mpirun", "-np", "1", sys.executable, "-c", "print('never')"],
        "env": [{"name": "AIRFLOW_TRAINING_MPI_DAEMON_TIMEOUT", "value": "2"}],
    }
    jobs.create(mpijob("lost", launcher, worker, 1))
    started = time.monotonic()
    done = jobs.wait("MPIJob", "lost", "Failed", timeout=30)
    assert time.monotonic() - started < 25
    assert conditions(done)[-1][:3] == ("Failed", "True", "MPIJobMPIJobFailed")  # (sic: upstream's reason)
    log = jobs.logs("lost-launcher")
    assert f"error: orted in pod {_worker_address(jobs)} {said}" in log, log
    assert "ORTE was unable to reliably start one or more daemons" in log


def _worker_address(jobs: Jobs) -> str:
    config = jobs.core.read_namespaced_config_map("lost-config", jobs.namespace)
    return str(config.data["hostfile"].split()[0])


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
    jobs.create(mpijob("grow", launcher, sleeper, 1))
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


def test_the_launcher_gets_the_account_role_and_binding_upstream_creates(kube_api: Any, test_namespace: str) -> None:
    """``kubexec.sh`` runs ``kubectl exec`` as the launcher's own account: the operator makes it,
    a Role that may exec into this job's workers only (updated when they change), and the binding."""
    from kubernetes import client

    jobs = Jobs(kube_api, test_namespace)
    sleeper = {
        "name": "mpi",
        "image": "mpioperator/openmpi",
        "command": [sys.executable, "-c", "import time; time.sleep(60)"],
    }
    jobs.create(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MPIJob",
            "metadata": {"name": "held"},
            "spec": {
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": {"spec": {"containers": [sleeper]}}},
                    "Worker": {"replicas": 2, "template": {"spec": {"containers": [sleeper]}}},
                },
            },
        }
    )
    rbac, core = client.RbacAuthorizationV1Api(kube_api), client.CoreV1Api(kube_api)
    account = wait_for(
        lambda: _maybe(core.read_namespaced_service_account, "held-launcher", test_namespace), 20, "the account"
    )
    assert [(r.kind, r.name, r.controller) for r in account.metadata.owner_references] == [("MPIJob", "held", True)]
    role = rbac.read_namespaced_role("held-launcher", test_namespace)
    assert [(r.verbs, r.resources, r.resource_names) for r in role.rules] == [
        (["get", "list", "watch"], ["pods"], None),
        (["create"], ["pods/exec"], ["held-worker-0", "held-worker-1"]),
    ]
    binding = rbac.read_namespaced_role_binding("held-launcher", test_namespace)
    assert [(s.kind, s.name, s.namespace) for s in binding.subjects] == [
        ("ServiceAccount", "held-launcher", test_namespace)
    ]
    launcher = wait_for(lambda: _maybe(core.read_namespaced_pod, "held-launcher", test_namespace), 20, "the launcher")
    assert launcher.spec.service_account_name == "held-launcher"

    def may_exec(pod: str) -> bool:
        review = {
            "spec": {
                "user": f"system:serviceaccount:{test_namespace}:held-launcher",
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": {
                    "namespace": test_namespace,
                    "verb": "create",
                    "resource": "pods",
                    "subresource": "exec",
                    "name": pod,
                },
            }
        }
        return bool(client.AuthorizationV1Api(kube_api).create_subject_access_review(review).status.allowed)

    assert may_exec("held-worker-1") and not may_exec("held-launcher") and not may_exec("held-worker-2")
    jobs.patch("MPIJob", "held", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 3}}}})
    wait_for(lambda: may_exec("held-worker-2") or None, 20, "the Role to follow the workers")
    jobs.delete("MPIJob", "held")
    wait_for(lambda: _maybe(rbac.read_namespaced_role, "held-launcher", test_namespace) is None or None, 20, "GC")


def _maybe(read: Any, name: str, namespace: str) -> Any:
    try:
        return read(name, namespace)
    except Exception:
        return None
