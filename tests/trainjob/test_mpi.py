"""An MPI TrainJob over 2 nodes on the embedded control plane: the launcher's ``mpirun`` reads the
hostfile the MPI plugin built, starts one rank in each node pod, and the ranks allreduce."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_training.embedded import ControlPlane
from tests.requires import requires
from tests.trainjob.helpers import GROUP, PY, VERSION, TrainJobs, trainjob

pytestmark = requires("mpi4py")
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
ALLREDUCE = (
    "import os; from mpi4py import MPI; c = MPI.COMM_WORLD; total = c.allreduce(c.Get_rank() + 1); "
    "print(f'rank {c.Get_rank()} of {c.Get_size()} on {os.environ[\"HOSTNAME\"]} sum {total}', flush=True)"
)


def _rjob(name: str, command: list[str], **extra: Any) -> dict[str, Any]:
    template: dict[str, Any] = {
        "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "mpi:local", "command": command}]}}}
    }
    return {"name": name, **extra, "template": template}


def mpi_runtime() -> dict[str, Any]:
    node = _rjob("node", ["/usr/sbin/sshd", "-De"])  # as upstream's runtimes: the embedded node waits instead
    launcher = _rjob("launcher", [PY, "-c", "pass"], dependsOn=[{"name": "node", "status": "Ready"}])
    launcher["template"]["metadata"] = {"labels": {ANCESTOR: "trainer"}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingRuntime",
        "metadata": {"name": "mpi-local"},
        "spec": {
            "mlPolicy": {
                "numNodes": 1,
                "mpi": {
                    "numProcPerNode": 1,
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": "/home/mpiuser/.ssh",
                    "runLauncherAsNode": False,
                },
            },
            "template": {
                "spec": {
                    "network": {"publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                    "replicatedJobs": [node, launcher],
                }
            },
        },
    }


@pytest.fixture
def tj(kube_api: Any, test_namespace: str, control_plane: ControlPlane) -> TrainJobs:
    return TrainJobs(kube_api, test_namespace, control_plane.kubeconfig)


def test_mpi_trainjob_allreduces_over_two_nodes(tj: TrainJobs) -> None:
    tj.create(mpi_runtime())
    tj.create(
        trainjob(
            "mpi",
            runtime="mpi-local",
            kind="TrainingRuntime",
            numNodes=2,
            command=["mpirun", "-n", "2", PY, "-c", ALLREDUCE],
        )
    )
    tj.wait_condition("mpi", "Complete", timeout=120)
    hostfile = tj.core.read_namespaced_config_map("mpi-mpi-hostfile", tj.namespace).data["hostfile"]
    assert len(hostfile.splitlines()) == 2 and all(line.endswith(" slots=1") for line in hostfile.splitlines())
    secret = tj.core.read_namespaced_secret("mpi-mpi-ssh-auth", tj.namespace)
    assert secret.type == "kubernetes.io/ssh-auth"
    launcher = next(
        p for p in tj.pods("mpi") if p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] == "launcher"
    )
    log = tj.logs(launcher.metadata.name)
    assert "rank 0 of 2 on mpi-node-0-0 sum 3" in log and "rank 1 of 2 on mpi-node-0-1 sum 3" in log, log
