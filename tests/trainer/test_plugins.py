"""mlPolicy plugins and the JobSet build, against ``trainer-v2.md`` §3 and the worked example of §8."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from airflow_provider_training.frameworks.trainer import BuildError, Built, build, new_ssh_key
from airflow_provider_training.specs.trainer import default_runtimes, documents
from airflow_provider_training.specs.trainer.models import TrainingRuntime, TrainJob
from tests.factories import initializer_job, mutate, runtime, trainjob

RANK = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def _job(doc: dict[str, Any]) -> TrainJob:
    checked = documents.check_document(doc)
    assert checked.errors == [], checked.errors
    assert isinstance(checked.object, TrainJob)
    return checked.object


def _runtime(doc: dict[str, Any]) -> TrainingRuntime:
    checked = documents.check_document(doc)
    assert checked.errors == [], checked.errors
    assert isinstance(checked.object, TrainingRuntime)
    return checked.object


def _build(job: dict[str, Any], rt: dict[str, Any] | str = "torch-distributed", **kwargs: Any) -> Built:
    resolved = default_runtimes()[rt] if isinstance(rt, str) else _runtime(rt)
    return build(_job(job), resolved, **kwargs)


def _rjob(built: Built, name: str) -> dict[str, Any]:
    return next(j for j in built.jobset["spec"]["replicatedJobs"] if j["name"] == name)


def _container(built: Built, job: str, name: str = "node") -> dict[str, Any]:
    pod = _rjob(built, job)["template"]["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == name)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_worked_example_torch_two_nodes() -> None:
    """§8: torch-distributed, numNodes 2, resourcesPerNode {cpu: 1} as the SDK sends it (JSON numbers)."""
    job = trainjob(
        numNodes=2,
        command=["bash", "-c", "torchrun train.py"],
        resourcesPerNode={"limits": {"cpu": 1.0}, "requests": {"cpu": 1.0}},
    )
    job["metadata"] = {"name": "tj", "namespace": "ns", "uid": "u-1"}
    built = _build(job)
    jobset = built.jobset
    assert jobset["metadata"] == {
        "name": "tj",
        "namespace": "ns",
        "ownerReferences": [
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "name": "tj",
                "uid": "u-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    assert jobset["spec"]["suspend"] is False
    node = _rjob(built, "node")
    assert node["replicas"] == 1
    assert node["template"]["metadata"]["labels"] == {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
    assert node["template"]["spec"]["parallelism"] == 2 and node["template"]["spec"]["completions"] == 2
    container = _container(built, "node")
    assert container["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}
    assert container["command"] == ["bash", "-c", "torchrun train.py"]
    assert container["env"] == [
        {"name": "PET_NNODES", "value": "2"},
        {"name": "PET_NPROC_PER_NODE", "value": "1"},
        {"name": "PET_NODE_RANK", "valueFrom": RANK},
        {"name": "PET_MASTER_ADDR", "value": "tj-node-0-0.tj"},
        {"name": "PET_MASTER_PORT", "value": "29500"},
    ]
    assert container["ports"] == [{"containerPort": 29500}]
    assert built.objects == []


@pytest.mark.parametrize(
    ("trainer", "expected"),
    [
        ({"numProcPerNode": 3}, "3"),
        ({"resourcesPerNode": {"requests": {"cpu": "2500m"}}}, "3"),  # requests.cpu rounded up
        ({"resourcesPerNode": {"limits": {"cpu": 4}}}, "4"),
        ({"resourcesPerNode": {"requests": {"cpu": "0"}, "limits": {"cpu": 2}}}, "2"),
        ({"resourcesPerNode": {"limits": {"memory": "1Gi"}}}, "1"),
        ({"resourcesPerNode": {"limits": {"nvidia.com/gpu": 2, "cpu": 8}}}, "auto"),
        ({"resourcesPerNode": {"limits": {"nvidia.com/mig-1g.5gb": 1, "cpu": 2}}}, "2"),  # MIG is not "gpu"
        ({"resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}}, "numProcPerNode": 2}, "2"),
        ({}, "1"),
        # Cases of upstream's torch_test.go: Quantity.Value() rounds up; any resource named *gpu* counts.
        ({"resourcesPerNode": {"limits": {"cpu": "2.5"}, "requests": {"cpu": "2.5"}}}, "3"),
        ({"resourcesPerNode": {"limits": {"cpu": "0.7"}, "requests": {"cpu": "0.7"}}}, "1"),
        ({"resourcesPerNode": {"limits": {"cpu": "6", "example.com/gpu": "2"}}}, "auto"),
    ],
)
def test_torch_nproc_per_node(trainer: dict[str, Any], expected: str) -> None:
    job = trainjob(**trainer) if trainer else mutate(trainjob(), "spec.trainer", {})
    assert _env(_container(_build(job), "node"))["PET_NPROC_PER_NODE"] == expected


def test_torch_nproc_from_runtime_resources_when_trainjob_sets_none() -> None:
    rt = mutate(runtime(), "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources",
                {"requests": {"cpu": 6}})  # fmt: skip
    on_own = mutate(trainjob(numNodes=1), "spec.runtimeRef", {"name": "my-runtime", "kind": "TrainingRuntime"})
    assert _env(_container(_build(on_own, rt), "node"))["PET_NPROC_PER_NODE"] == "6"


def test_without_spec_trainer_no_pet_env_and_no_port() -> None:
    container = _container(_build(trainjob()), "node")
    assert "env" not in container and "ports" not in container
    assert _rjob(_build(trainjob()), "node")["template"]["spec"]["parallelism"] == 1


def test_env_order_runtime_then_trainer_then_plugin_and_in_place_replacement() -> None:
    path = "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
    rt = mutate(runtime(), f"{path}.env", [{"name": "A", "value": "runtime"}, {"name": "B", "value": "runtime"}])
    rt = mutate(rt, f"{path}.ports", [{"containerPort": 8080}])
    job = mutate(trainjob(env=[{"name": "B", "value": "job"}, {"name": "C", "value": "job"}]), "spec.runtimeRef",
                 {"name": "my-runtime", "kind": "TrainingRuntime"})  # fmt: skip
    container = _container(_build(job, rt), "node")
    names = [e["name"] for e in container["env"]]
    assert names == ["A", "B", "C", "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
                     "PET_MASTER_PORT"]  # fmt: skip
    assert _env(container)["B"] == "job"
    # Two unnamed ports count as the same port upstream (byContainerPortOrName compares nil names).
    assert container["ports"] == [{"containerPort": 29500}]


def test_image_command_args_override_and_suspend() -> None:
    job = mutate(trainjob(image="my/img:1", command=["python"], args=["t.py"]), "spec.suspend", True)
    built = _build(job)
    container = _container(built, "node")
    assert (container["image"], container["command"], container["args"]) == ("my/img:1", ["python"], ["t.py"])
    assert built.jobset["spec"]["suspend"] is True


def test_resources_merge_per_resource_name() -> None:
    path = "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources"
    rt = mutate(runtime(), path, {"limits": {"nvidia.com/gpu": 2, "memory": "8Gi"}})
    job = mutate(trainjob(resourcesPerNode={"limits": {"cpu": 4, "memory": "16Gi"}}), "spec.runtimeRef",
                 {"name": "my-runtime", "kind": "TrainingRuntime"})  # fmt: skip
    container = _container(_build(job, rt), "node")
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 2, "memory": "16Gi", "cpu": "4"}}
    # torch counts GPUs from the TrainJob's resources alone when it sets them (un-merged): none there.
    assert _env(container)["PET_NPROC_PER_NODE"] == "4"


def test_env_injection_targets_get_pet_and_master_env() -> None:
    rt = mutate(runtime(ml_policy={"torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["check"]}]}}}),
                "spec.template.spec.replicatedJobs[0].template.spec.template.spec.initContainers",
                [{"name": "check", "image": "busybox"}])  # fmt: skip
    job = mutate(trainjob(numNodes=3), "spec.runtimeRef", {"name": "my-runtime", "kind": "TrainingRuntime"})
    built = _build(job, rt)
    init = _rjob(built, "node")["template"]["spec"]["template"]["spec"]["initContainers"][0]
    assert _env(init) == {
        "PET_NNODES": "3",
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": RANK,
        "PET_MASTER_ADDR": "tj-node-0-0.tj",
        "PET_MASTER_PORT": "29500",
    }


def test_torchtune_is_refused_clearly() -> None:
    with pytest.raises(BuildError, match="torchtune"):
        _build(trainjob(command=["tune", "run"]))


def test_mpi_deepspeed_three_nodes() -> None:
    """§3.6: runLauncherAsNode, numNodes 3 → node pods 2 + launcher 1, hostfile in replicatedJob order."""
    job = trainjob(numNodes=3, env=[{"name": "X", "value": "1"}], resourcesPerNode={"limits": {"cpu": 2}})
    key = new_ssh_key()
    built = _build(job, "deepspeed-distributed", ssh_key=key)
    assert _rjob(built, "node")["template"]["spec"]["parallelism"] == 2
    assert _rjob(built, "launcher")["template"]["spec"]["parallelism"] == 1
    assert _rjob(built, "launcher")["dependsOn"] == [{"name": "node", "status": "Ready"}]
    secret, hostfile = built.objects
    assert hostfile["metadata"]["name"] == "tj-mpi-hostfile"
    assert hostfile["data"]["hostfile"] == (
        "tj-node-0-0.tj slots=1\ntj-node-0-1.tj slots=1\ntj-launcher-0-0.tj slots=1\n"
    )
    launcher = _container(built, "launcher")
    assert _env(launcher) == {
        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": "1",
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
        "X": "1",
    }
    assert launcher["volumeMounts"] == [
        {"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"},
        {"name": "mpi-hostfile", "mountPath": "/etc/mpi"},
    ]
    node = _container(built, "node")
    assert node["volumeMounts"] == [{"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"}]
    assert _env(node) == {"X": "1"}  # trainer env reaches the node job too when the launcher runs as a node
    assert node["resources"]["limits"] == {"cpu": "2"} and launcher["resources"]["limits"] == {"cpu": "2"}
    assert node["command"] == ["/usr/sbin/sshd"]  # trainer settings other than env stay on the launcher
    launcher_pod = _rjob(built, "launcher")["template"]["spec"]["template"]["spec"]
    assert [v["name"] for v in launcher_pod["volumes"]] == ["mpi-ssh-auth", "mpi-hostfile"]
    assert launcher_pod["volumes"][0]["secret"] == {
        "secretName": "tj-mpi-ssh-auth",
        "defaultMode": 0o400,
        "items": [
            {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
            {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
            {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644},
        ],
    }
    assert secret["type"] == "kubernetes.io/ssh-auth" and secret["immutable"] is True
    assert base64.b64decode(secret["data"]["ssh-privatekey"]).decode() == key
    assert key.startswith("-----BEGIN EC PRIVATE KEY-----")
    public = base64.b64decode(secret["data"]["ssh-publickey"]).decode()
    assert public.startswith("ecdsa-sha2-nistp521 ") and public.endswith("\n")


@pytest.mark.parametrize(
    ("trainer", "slots"),
    [
        ({"numNodes": 2, "numProcPerNode": 4}, "4"),
        ({"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}, "8"),
    ],
)
def test_mpi_slots(trainer: dict[str, Any], slots: str) -> None:
    built = _build(trainjob(**trainer), "mlx-distributed")
    assert _env(_container(built, "launcher"))["OMPI_MCA_orte_set_default_slots"] == slots
    assert built.objects[-1]["data"]["hostfile"].splitlines()[0] == f"tj-node-0-0.tj slots={slots}"


def test_mpi_without_launcher_as_node_and_unsupported_implementation() -> None:
    jobs = [
        {"name": "launcher", "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                          "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "mpi"}]}}}}},
        {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [{"name": "node", "image": "mpi"}]}}}}},
    ]  # fmt: skip
    rt = runtime(ml_policy={"mpi": {}}, jobs=jobs)
    job = mutate(trainjob(numNodes=2), "spec.runtimeRef", {"name": "my-runtime", "kind": "TrainingRuntime"})
    built = _build(job, rt)
    assert built.objects[-1]["data"]["hostfile"] == "tj-node-0-0.tj slots=1\ntj-node-0-1.tj slots=1\n"
    assert _container(built, "launcher")["volumeMounts"][0] == {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"}
    with pytest.raises(BuildError, match="MPI implementation for  doesn't supported"):
        _build(job, mutate(rt, "spec.mlPolicy.mpi.mpiImplementation", ""))


def test_jax_env() -> None:
    container = _container(_build(trainjob(numNodes=4), "jax-distributed"), "node")
    assert _env(container) == {
        "JAX_NUM_PROCESSES": "4",
        "JAX_PROCESS_ID": RANK,
        "JAX_COORDINATOR_ADDRESS": "tj-node-0-0.tj:29500",
    }
    assert container["ports"] == [{"containerPort": 29500}]


@pytest.mark.parametrize(("resources", "workers"), [({}, "3"), ({"limits": {"nvidia.com/gpu": 2}}, "6")])
def test_xgboost_env(resources: dict[str, Any], workers: str) -> None:
    trainer: dict[str, Any] = {"numNodes": 3, "env": [{"name": "A", "value": "1"}]}
    if resources:
        trainer["resourcesPerNode"] = resources
    container = _container(_build(trainjob(**trainer), "xgboost-distributed"), "node")
    assert _env(container) == {
        "A": "1",
        "DMLC_TRACKER_URI": "tj-node-0-0.tj",
        "DMLC_TRACKER_PORT": "29500",
        "DMLC_TASK_ID": RANK,
        "DMLC_NUM_WORKER": workers,
    }


def test_plain_runtime_gets_node_count_and_env_only() -> None:
    rt = runtime(ml_policy={"numNodes": 2})
    job = mutate(
        trainjob(env=[{"name": "A", "value": "1"}]),
        "spec.runtimeRef",
        {"name": "my-runtime", "kind": "TrainingRuntime"},
    )
    built = _build(job, rt)
    assert _env(_container(built, "node")) == {"A": "1"}
    assert _rjob(built, "node")["template"]["spec"]["completions"] == 2


def test_runtime_patches_merge_strategically_and_propagate_labels() -> None:
    rt = runtime(
        jobs=[initializer_job("dataset-initializer"), runtime()["spec"]["template"]["spec"]["replicatedJobs"][0]]
    )
    rt["spec"]["template"]["metadata"] = {"labels": {"team": "a", "tier": "x"}}
    patches = [
        {"manager": "a.io/first", "trainingRuntimeSpec": {"template": {
            "metadata": {"labels": {"tier": "y"}, "annotations": {"note": "1"}},
            "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
                "metadata": {"labels": {"pod": "label"}},
                "spec": {"nodeSelector": {"pool": "gpu"},
                         "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
                         "containers": [{"name": "node", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}}}}]},
        }}},
        {"manager": "a.io/second", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": {"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}}}}},
            {"name": "dataset-initializer", "template": {"spec": {"template": {"spec": {
                "containers": [{"name": "dataset-initializer", "env": [{"name": "NO", "value": "x"}]}]}}}}},
        ]}}}},
    ]  # fmt: skip
    job = mutate(mutate(trainjob(numNodes=1), "spec.runtimePatches", patches), "spec.runtimeRef",
                 {"name": "my-runtime", "kind": "TrainingRuntime"})  # fmt: skip
    job["spec"]["initializer"] = {"dataset": {"storageUri": "hf://org/data", "env": [{"name": "ACCESS_TOKEN", "value": "t"}],
                                              "secretRef": {"name": "hf-token"}}}  # fmt: skip
    built = _build(job, rt)
    assert built.jobset["metadata"]["labels"] == {"team": "a", "tier": "y"}
    assert built.jobset["metadata"]["annotations"] == {"note": "1"}
    assert [j["name"] for j in built.jobset["spec"]["replicatedJobs"]] == ["dataset-initializer", "node"]
    pod = _rjob(built, "node")["template"]["spec"]["template"]
    assert pod["metadata"] == {"labels": {"pod": "label"}}
    assert pod["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert pod["spec"]["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert pod["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]
    node = _container(built, "node")
    assert node["image"] == "python:3.11" and node["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
    initializer = _container(built, "dataset-initializer", "dataset-initializer")
    assert initializer["env"] == [
        {"name": "NO", "value": "x"},
        {"name": "STORAGE_URI", "value": "hf://org/data"},
        {"name": "ACCESS_TOKEN", "value": "t"},
    ]
    assert initializer["envFrom"] == [{"secretRef": {"name": "hf-token"}}]
    assert _rjob(built, "dataset-initializer")["replicas"] == 1


def test_initializers_run_before_the_trainer_through_depends_on() -> None:
    node = runtime()["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["dependsOn"] = [
        {"name": "dataset-initializer", "status": "Complete"},
        {"name": "model-initializer", "status": "Complete"},
    ]
    rt = runtime(jobs=[initializer_job("dataset-initializer"), initializer_job("model-initializer"), node])
    job = mutate(trainjob(numNodes=2), "spec.runtimeRef", {"name": "my-runtime", "kind": "TrainingRuntime"})
    job["spec"]["initializer"] = {"model": {"storageUri": "hf://m"}}
    built = _build(job, rt)
    assert [j["name"] for j in built.jobset["spec"]["replicatedJobs"]] == [
        "dataset-initializer",
        "model-initializer",
        "node",
    ]
    assert _rjob(built, "node")["dependsOn"] == node["dependsOn"]
    assert "env" not in _container(built, "dataset-initializer", "dataset-initializer")
    assert _env(_container(built, "model-initializer", "model-initializer")) == {"STORAGE_URI": "hf://m"}
    assert _rjob(built, "model-initializer")["template"]["spec"]["parallelism"] == 1


def test_custom_subdomain_reaches_hostfile_but_not_master_addr() -> None:
    rt = default_runtimes()["mlx-distributed"].to_dict()
    rt["spec"]["template"]["spec"]["network"] = {"subdomain": "net", "publishNotReadyAddresses": True}
    built = _build(trainjob(numNodes=2), rt)
    assert built.objects[-1]["data"]["hostfile"].startswith("tj-node-0-0.net slots=1\n")
    torch_rt = mutate(runtime(), "spec.template.spec.network", {"subdomain": "net"})
    job = mutate(trainjob(numNodes=2), "spec.runtimeRef", {"name": "my-runtime", "kind": "TrainingRuntime"})
    assert _env(_container(_build(job, torch_rt), "node"))["PET_MASTER_ADDR"] == "tj-node-0-0.tj"


def test_pod_group_policy_labels_and_annotations() -> None:
    rt = mutate(runtime(), "spec.podGroupPolicy", {"coscheduling": {}})
    job = mutate(trainjob(numNodes=2), "spec.runtimeRef", {"name": "my-runtime", "kind": "TrainingRuntime"})
    pod = _rjob(_build(job, rt), "node")["template"]["spec"]["template"]
    assert pod["metadata"]["labels"] == {"scheduling.x-k8s.io/pod-group": "tj"}
    rt = mutate(runtime(), "spec.podGroupPolicy", {"volcano": {}})
    pod = _rjob(_build(job, rt), "node")["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "tj"}


def test_the_runtime_is_never_modified() -> None:
    rt = default_runtimes()["torch-distributed"]
    before = rt.to_dict()
    build(_job(trainjob(numNodes=2, env=[{"name": "A", "value": "1"}])), rt)
    assert rt.to_dict() == before
