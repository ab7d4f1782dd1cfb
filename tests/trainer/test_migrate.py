"""``airflow-training migrate``: v1 jobs become TrainJobs that validate and build, and every input
field is either mapped or reported."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_provider_training.frameworks.trainer import build
from airflow_provider_training.frameworks.trainer.migrate import Migration, migrate
from airflow_provider_training.specs.loader import read_documents
from airflow_provider_training.specs.trainer import default_runtimes, documents
from airflow_provider_training.specs.trainer.models import TrainingRuntime, TrainJob
from airflow_provider_training.validation import validate
from tests.factories import minimal, mutate
from tests.paths import SEED

SWEPT = "no Trainer v2 equivalent; left out"


def _check(migration: Migration) -> tuple[TrainJob, TrainingRuntime]:
    """The migration validates as a whole and builds a JobSet; returns the typed TrainJob and runtime."""
    reports = validate(migration.documents())
    assert all(r.ok for r in reports), [r.lines() for r in reports]
    job = documents.check_document(migration.trainjob).object
    assert isinstance(job, TrainJob)
    if migration.runtime is not None:
        runtime = documents.check_document(migration.runtime).object
        assert isinstance(runtime, TrainingRuntime)
    else:
        runtime = default_runtimes()[job.spec.runtime_ref.name]
    build(job, runtime)
    return job, runtime


def _messages(migration: Migration, kind: str) -> list[str]:
    return [str(f) for f in migration.by_kind(kind)]  # type: ignore[arg-type]


def _seed_jobs() -> list[Any]:
    return [
        pytest.param(doc.data, id=f"{path.name}#{i}")
        for path in sorted(SEED.glob("*.yaml"))
        for i, doc in enumerate(read_documents(path))
        if doc.data.get("apiVersion") == "kubeflow.org/v1"
    ]


def test_the_seed_examples_are_there() -> None:
    assert len(_seed_jobs()) >= 7, f"expected the v1 seed examples under {SEED}"


@pytest.mark.parametrize("job", _seed_jobs())
def test_every_seed_example_migrates_with_every_field_accounted(job: dict[str, Any]) -> None:
    migration = migrate(job)
    assert not [f for f in migration.findings if f.message == SWEPT], migration.render()
    trainjob, _ = _check(migration)
    if job["kind"] != "MPIJob":
        field = next(k for k in job["spec"] if k.endswith("ReplicaSpecs"))
        replicas = job["spec"][field]
        if job["kind"] == "PyTorchJob":
            assert trainjob.spec.trainer is not None
            assert trainjob.spec.trainer.num_nodes == sum(r.get("replicas", 1) for r in replicas.values())


def _mnist() -> dict[str, Any]:
    """The shape of the seed's pytorch-mnist-ddp: Master + 3 Workers, torch.distributed.launch, PVCs."""
    container = {
        "name": "pytorch",
        "image": "pytorch/pytorch:2.0.0-cuda11.7-cudnn8-runtime",
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "torch.distributed.launch", "--nnodes=$(WORLD_SIZE)", "--node_rank=$(RANK)",
                    "--master_addr=$(MASTER_ADDR)", "--master_port=$(MASTER_PORT)", "train.py"],
        "ports": [{"containerPort": 23456, "name": "pytorchjob-port"}],
        "resources": {"limits": {"cpu": "4", "nvidia.com/gpu": 1}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }  # fmt: skip
    template = {
        "metadata": {"annotations": {"sidecar.istio.io/inject": "false"}},
        "spec": {"containers": [container], "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]},
    }
    replica = {"restartPolicy": "OnFailure", "template": template}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "mnist", "namespace": "team", "labels": {"app": "mnist"}},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None", "activeDeadlineSeconds": 3600, "backoffLimit": 3},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, **copy.deepcopy(replica)},
                "Worker": {"replicas": 3, **copy.deepcopy(replica)},
            },
        },
    }


def test_pytorchjob_on_the_default_runtime_with_patches() -> None:
    migration = migrate(_mnist())
    assert migration.runtime is None
    tj = migration.trainjob
    assert tj["metadata"] == {"name": "mnist", "namespace": "team", "labels": {"app": "mnist"}}
    assert tj["spec"]["runtimeRef"] == {"name": "torch-distributed"}
    assert tj["spec"]["activeDeadlineSeconds"] == 3600
    trainer = tj["spec"]["trainer"]
    assert trainer["numNodes"] == 4
    assert trainer["command"][3:7] == [
        "--nnodes=$(PET_NNODES)",
        "--node_rank=$(PET_NODE_RANK)",
        "--master_addr=$(PET_MASTER_ADDR)",
        "--master_port=$(PET_MASTER_PORT)",
    ]
    assert trainer["resourcesPerNode"] == {"limits": {"cpu": "4", "nvidia.com/gpu": 1}}
    (patch,) = tj["spec"]["runtimePatches"]
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"] == {"annotations": {"sidecar.istio.io/inject": "false"}}
    assert pod["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]
    assert pod["spec"]["containers"] == [{"name": "node", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]
    lost = _messages(migration, "lost")
    assert any(m.startswith("spec.runPolicy.cleanPodPolicy: left out: Trainer v2 has no cleanPodPolicy") for m in lost)
    assert any(m.startswith("spec.runPolicy.backoffLimit: left out: restarts are the runtime's business") for m in lost)
    changed = _messages(migration, "changed")
    assert any("$(RANK) becomes $(PET_NODE_RANK)" in m for m in changed)
    assert any("ports: left out: Trainer v2 opens port 29500 itself" in m for m in changed)
    assert any("metadata.labels: TrainJob metadata.labels (Trainer v2 does not copy them" in m for m in changed)
    assert not [f for f in migration.findings if f.message == SWEPT]
    job, runtime = _check(migration)
    jobset = build(job, runtime).jobset
    env = {
        e["name"]: e.get("value")
        for e in jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PET_NNODES"] == "4" and env["PET_NPROC_PER_NODE"] == "auto"


def test_what_only_a_runtime_carries_goes_to_a_generated_runtime() -> None:
    job = _mnist()
    for rtype in ("Master", "Worker"):
        pod = job["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]
        pod["containers"][0]["workingDir"] = "/work"
        pod["containers"].append({"name": "log-shipper", "image": "fluent-bit"})
        pod["nodeSelector"] = {"pool": "gpu"}
        pod["priorityClassName"] = "high"
    migration = migrate(job)
    runtime = migration.runtime
    assert runtime is not None and runtime["kind"] == "TrainingRuntime"
    assert runtime["metadata"]["name"] == "mnist-torch-distributed"
    assert runtime["metadata"]["namespace"] == "team"
    assert migration.trainjob["spec"]["runtimeRef"] == {"name": "mnist-torch-distributed", "kind": "TrainingRuntime"}
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["node", "log-shipper"]
    assert pod["containers"][0]["workingDir"] == "/work" and pod["priorityClassName"] == "high"
    assert "nodeSelector" not in pod  # a patch carries it
    patch = migration.trainjob["spec"]["runtimePatches"][0]
    patched = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"
    ]
    assert patched["nodeSelector"] == {"pool": "gpu"}
    _check(migration)


def test_per_replica_differences_and_reserved_env_are_reported() -> None:
    job = _mnist()
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"] = {"limits": {"cpu": "2"}}
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    master["env"] = [{"name": "PET_NNODES", "value": "9"}, {"name": "EPOCHS", "value": "3"}]
    migration = migrate(job)
    lost = _messages(migration, "lost")
    expected = (
        "spec.pytorchReplicaSpecs[Worker].template: left out: every node of a TrainJob runs one pod template "
        "(Master's); Worker differs at spec.containers[0].env"
    )
    assert any(m.startswith(expected) and "spec.containers[0].resources.limits.cpu" in m for m in lost), lost
    assert any("env[0]: left out: PET_NNODES is set by Trainer v2 and reserved" in m for m in lost)
    assert migration.trainjob["spec"]["trainer"]["env"] == [{"name": "EPOCHS", "value": "3"}]
    _check(migration)


def test_unknown_fields_are_never_dropped_silently() -> None:
    job = mutate(_mnist(), "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].frobnicate", True)
    job["spec"]["madeUp"] = {"a": 1}
    findings = {str(f) for f in migrate(job).findings}
    assert f"spec.madeUp.a: {SWEPT}" in findings
    assert any("containers[0].frobnicate: the generated TrainingRuntime" in f for f in findings)


def test_tfjob_ps_topology_and_missing_tf_config() -> None:
    job = minimal("TFJob", "tf")
    job["spec"]["tfReplicaSpecs"]["PS"] = {
        "replicas": 2,
        "template": job["spec"]["tfReplicaSpecs"]["Worker"]["template"],
    }
    migration = migrate(job)
    lost = _messages(migration, "lost")
    assert any(m.startswith("spec.tfReplicaSpecs[PS]: left out: parameter servers") for m in lost)
    assert any("the environment the v1 operator injected (TF_CONFIG) is not set" in m for m in lost)
    assert migration.trainjob["spec"]["trainer"] == {"numNodes": 2}
    runtime = migration.runtime
    assert runtime is not None and "mlPolicy" in runtime["spec"] and "torch" not in runtime["spec"]["mlPolicy"]
    _check(migration)


def test_mpijob_becomes_an_mpi_runtime_with_launcher_and_nodes() -> None:
    job = minimal("MPIJob", "hvd")
    job["spec"]["slotsPerWorker"] = 2
    migration = migrate(job)
    runtime = migration.runtime
    assert runtime is not None
    assert runtime["spec"]["mlPolicy"]["mpi"]["numProcPerNode"] == 2
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert [j["name"] for j in jobs] == ["node", "launcher"]
    assert jobs[1]["dependsOn"] == [{"name": "node", "status": "Ready"}]
    assert all(j["template"]["spec"]["template"]["spec"]["containers"][0]["name"] == "node" for j in jobs)
    assert migration.trainjob["spec"]["trainer"] == {"numNodes": 2}
    assert any("must run sshd" in m for m in _messages(migration, "changed"))
    trainjob, rt = _check(migration)
    built = build(trainjob, rt)
    assert built.objects[-1]["data"]["hostfile"] == "hvd-node-0-0.hvd slots=2\nhvd-node-0-1.hvd slots=2\n"


@pytest.mark.parametrize(
    ("kind", "runtime_name"), [("JAXJob", "jax-distributed"), ("XGBoostJob", "xgboost-distributed")]
)
def test_jax_and_xgboost_use_their_default_runtimes(kind: str, runtime_name: str) -> None:
    job = minimal(kind, "j")
    for replica in next(iter(job["spec"].values())).values():
        replica["restartPolicy"] = "OnFailure"  # "Never" would need a generated runtime (JobSet uses OnFailure)
        container = replica["template"]["spec"]["containers"][0]
        container["command"] = ["python", "t.py", "--rank=$(RANK)", "--pid=$(PROCESS_ID)"]
    migration = migrate(job)
    assert migration.trainjob["spec"]["runtimeRef"] == {"name": runtime_name}
    command = migration.trainjob["spec"]["trainer"]["command"]
    if kind == "JAXJob":
        assert command[3] == "--pid=$(JAX_PROCESS_ID)"
    else:
        assert command[2] == "--rank=$(DMLC_TASK_ID)"
    _check(migration)


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_training.cli", "migrate", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def test_cli_prints_yaml_that_applies_and_validates(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump_all([_mnist(), minimal("TFJob", "tf"), {"apiVersion": "v1", "kind": "ConfigMap"}]))
    result = _cli("-f", str(path))
    assert result.returncode == 0, result.stderr
    assert f"{path}#3: ConfigMap is not a v1 training job; skipped" in result.stderr
    assert "# NOT carried over:" in result.stdout and "#   spec.runPolicy.cleanPodPolicy" in result.stdout
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["kind"] for d in docs] == ["TrainJob", "TrainingRuntime", "TrainJob"]
    out = tmp_path / "v2.yaml"
    out.write_text(result.stdout)
    assert all(r.ok for r in validate(out))


def test_cli_refuses_an_invalid_v1_job() -> None:
    result = _cli(
        "-f", "-", stdin=yaml.safe_dump(mutate(minimal("PyTorchJob"), "spec.pytorchReplicaSpecs.Master.replicas", "x"))
    )
    assert result.returncode == 1
    assert "<stdin>: invalid job document" in result.stderr and "replicas" in result.stderr


def test_references_nothing_sets_are_reported() -> None:
    job = _mnist()
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["args"] = ["--rdzv_id=$(PYTORCH_JOB_NAME)"]
    lost = _messages(migrate(job), "lost")
    assert any(
        "args[0]: $(PYTORCH_JOB_NAME): stays literal text, no Training Operator version sets it" in m for m in lost
    )


def test_cli_reports_what_validate_says_about_the_result(tmp_path: Path) -> None:
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(mutate(_mnist(), "metadata.name", "m" * 60)))
    result = _cli("-f", str(path))
    assert result.returncode == 0
    assert (
        f"# validate: TrainJob {'m' * 60}: error: metadata.name: the JobSet the controller creates for this TrainJob"
        in result.stdout
    )
