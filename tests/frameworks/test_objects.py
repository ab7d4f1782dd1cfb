"""Pod, Service and MPI ConfigMap objects (§3.2, §3.3, §4.3)."""

from __future__ import annotations

import pytest

from airflow_provider_training.frameworks import plugin
from airflow_provider_training.frameworks.mpi import MPIPlugin
from airflow_provider_training.frameworks.objects import build_pod, build_service
from tests.factories import typed_job as make_job

LBL = "training.kubeflow.org/"


def test_pytorch_worker_pod() -> None:
    p = plugin("PyTorchJob")
    job = make_job("PyTorchJob", "pj", {"Master": 1, "Worker": 2})
    job.replica_specs["Worker"].restart_policy = "ExitCode"
    tmpl = job.replica_specs["Worker"].template
    assert tmpl is not None and tmpl.spec is not None
    tmpl.spec.restart_policy = "Always"
    built = build_pod(p, job, "Worker", 1)
    pod = built.pod
    assert pod["metadata"]["name"] == "pj-worker-1"
    assert pod["metadata"]["labels"] == {
        LBL + "operator-name": "pytorchjob-controller",
        LBL + "job-name": "pj",
        LBL + "replica-type": "worker",
        LBL + "replica-index": "1",
    }
    assert pod["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "pj",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pod["spec"]["restartPolicy"] == "Never"
    assert [e.reason for e in built.events] == ["SetPodTemplateRestartPolicy"]
    assert [e["name"] for e in pod["spec"]["containers"][0]["env"]][:4] == [
        "PYTHONUNBUFFERED",
        "MASTER_PORT",
        "PET_MASTER_PORT",
        "MASTER_ADDR",
    ]
    init = pod["spec"]["initContainers"]
    assert init[0]["name"] == "init-pytorch" and "nslookup pj-master-0" in init[0]["command"][2]
    master = build_pod(p, job, "Master", 0).pod
    assert master["metadata"]["labels"][LBL + "job-role"] == "master"
    assert "initContainers" not in master["spec"]


@pytest.mark.parametrize(
    ("kind", "replicas", "rtype", "index", "role"),
    [
        ("PyTorchJob", {"Worker": 2}, "Worker", 0, True),
        ("PyTorchJob", {"Worker": 2}, "Worker", 1, False),
        ("TFJob", {"PS": 1, "Worker": 2}, "Worker", 0, True),
        ("TFJob", {"Chief": 1, "Worker": 2}, "Worker", 0, False),
        ("PaddleJob", {"Worker": 2}, "Worker", 0, False),
        ("JAXJob", {"Worker": 2}, "Worker", 0, True),
        ("MXJob", {"Scheduler": 1, "Server": 1}, "Server", 0, True),
        ("XGBoostJob", {"Master": 1, "Worker": 1}, "Master", 0, True),
    ],
)
def test_job_role_label(kind: str, replicas: dict[str, int], rtype: str, index: int, role: bool) -> None:
    p = plugin(kind)
    labels = build_pod(p, make_job(kind, "j", replicas), rtype, index).pod["metadata"]["labels"]
    assert (labels.get(LBL + "job-role") == "master") is role


def test_headless_service() -> None:
    p = plugin("TFJob")
    svc = build_service(p, make_job("TFJob", "t", {"Worker": 2}, namespace="ns"), "Worker", 1)
    assert svc is not None
    assert svc["metadata"]["name"] == "t-worker-1"
    assert svc["spec"] == {
        "clusterIP": "None",
        "selector": {
            LBL + "operator-name": "tfjob-controller",
            LBL + "job-name": "t",
            LBL + "replica-type": "worker",
            LBL + "replica-index": "1",
        },
        "ports": [{"name": "tfjob-port", "port": 2222}],
    }
    assert build_service(plugin("MPIJob"), make_job("MPIJob", "m", {"Launcher": 1}), "Launcher", 0) is None


def test_mpi_worker_and_launcher_pods() -> None:
    p = plugin("MPIJob")
    job = make_job("MPIJob", "m", {"Launcher": 1, "Worker": 2})
    worker = build_pod(p, job, "Worker", 1).pod
    assert worker["metadata"]["name"] == "m-worker-1"
    assert worker["metadata"]["labels"][LBL + "replica-index"] == "1"
    c = worker["spec"]["containers"][0]
    assert (c["command"], c["args"]) == (["sleep"], ["365d"])
    assert c["volumeMounts"] == [{"name": "mpi-job-config", "mountPath": "/etc/mpi"}]
    assert "env" not in c
    launcher = build_pod(p, job, "Launcher", 0).pod
    assert launcher["metadata"]["name"] == "m-launcher"
    assert LBL + "replica-index" not in launcher["metadata"]["labels"]
    assert launcher["metadata"]["labels"][LBL + "job-role"] == "master"
    assert launcher["spec"]["serviceAccountName"] == "m-launcher"
    assert launcher["spec"]["initContainers"][0]["name"] == "kubectl-delivery"
    assert launcher["spec"]["containers"][0]["env"][0] == {
        "name": "OMPI_MCA_plm_rsh_agent",
        "value": "/etc/mpi/kubexec.sh",
    }
    assert launcher["spec"]["restartPolicy"] == "Never"


def test_mpi_config_map_contents() -> None:
    job = make_job("MPIJob", "m", {"Launcher": 1, "Worker": 3}, slotsPerWorker=2, mainContainer="mpi")
    cm = MPIPlugin().config_map(job, running_workers=[2, 0])
    assert cm["metadata"]["name"] == "m-config" and cm["metadata"]["labels"] == {"app": "m"}
    assert cm["data"]["hostfile"] == "m-worker-0 slots=2\nm-worker-1 slots=2\nm-worker-2 slots=2\n"
    assert cm["data"]["discover_hosts.sh"] == "#!/bin/sh\necho m-worker-0:2\necho m-worker-2:2"
    assert cm["data"]["kubexec.sh"] == (
        '#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} --container mpi -- /bin/sh -c "$*"'
    )
