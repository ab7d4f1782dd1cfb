"""The YAML users paste from the setup guide (shared/examples/seed) and the mistakes in it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from airflow_provider_training.specs import dump_yaml, load_jobs
from airflow_provider_training.validation import ValidationReport, validate
from tests.factories import minimal
from tests.paths import SEED

SEED_FILES = sorted(SEED.glob("*.yaml"))


def _report(name: str, strict: bool = False) -> ValidationReport:
    [report] = validate(SEED / name, strict=strict)
    return report


def _warnings(report: ValidationReport) -> list[str]:
    return [str(w) for w in report.warnings]


def test_seed_folder_is_there() -> None:
    assert len(SEED_FILES) >= 8, f"expected the seed examples under {SEED}"


@pytest.mark.parametrize("path", SEED_FILES, ids=lambda p: p.name)
def test_every_seed_yaml_loads(path: Path) -> None:
    reports = validate(path)
    assert reports and all(r.kind for r in reports)
    original = yaml.safe_load(path.read_text())
    if original["apiVersion"] == "kubeflow.org/v1":
        [job] = load_jobs(path)
        # Round trip keeps every field the user wrote, including the unknown spec.cleanPodPolicy.
        assert job.to_dict() == original
        assert yaml.safe_load(dump_yaml(job)) == original


@pytest.mark.parametrize("name", ["pytorch-mnist-ddp.yaml", "tfjob-ps.yaml"])
def test_clean_pod_policy_in_the_wrong_place(name: str) -> None:
    report = _report(name)
    assert report.ok
    [warning] = [w for w in report.warnings if w.rule == "unknown-field"]
    assert warning.path == "spec.cleanPodPolicy"
    assert "did you mean spec.runPolicy.cleanPodPolicy?" in warning.message
    strict = _report(name, strict=True)
    assert not strict.ok
    assert [e.path for e in strict.errors] == ["spec.cleanPodPolicy"]


def test_mpijob_clean_pod_policy_is_a_real_field() -> None:
    report = _report("mpijob-horovod.yaml")
    assert report.ok
    assert not [w for w in report.warnings if w.rule == "unknown-field"]


def test_ddp_example_warns_about_the_deprecated_launcher() -> None:
    report = _report("pytorch-mnist-ddp.yaml")
    assert any("torch.distributed.launch is deprecated" in w for w in _warnings(report))
    # WORLD_SIZE is the user's own env; RANK, MASTER_ADDR and MASTER_PORT come from the Master: no reference warnings.
    assert not [w for w in report.warnings if w.rule == "env-reference"]


def test_elastic_example_uses_master_variables_without_a_master() -> None:
    report = _report("pytorch-elastic.yaml")
    refs = [str(w) for w in report.warnings if w.rule == "env-reference"]
    assert any("$(MASTER_ADDR) stays literal" in w and "only when the job has a Master replica" in w for w in refs)
    assert any("$(MASTER_PORT) stays literal" in w for w in refs)


def test_fsdp_example_references_variables_nobody_sets() -> None:
    report = _report("pytorch-fsdp-torchrun.yaml")
    refs = [str(w) for w in report.warnings if w.rule == "env-reference"]
    assert any("$(PYTORCH_JOB_NAME)" in w and "no Training Operator version sets" in w for w in refs)
    assert any("$(PET_RDZV_ENDPOINT)" in w and "only for jobs with an elasticPolicy" in w for w in refs)
    # PET_NNODES is set for a job without an elasticPolicy.
    assert not any("$(PET_NNODES)" in w for w in refs)


def test_train_and_package_cannot_run() -> None:
    report = _report("train-and-package.yaml")
    assert not report.ok
    [error] = report.errors
    assert error.level == "provider"
    assert error.path == "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].volumeMounts[0].name"
    assert 'Not found: "output"' in error.message
    refs = [str(w) for w in report.warnings if w.rule == "env-reference"]
    assert any("$RANK is empty in the shell" in w for w in refs)
    # $(date +%Y%m%d) is shell command substitution, not a Kubernetes variable.
    assert not any("date" in w for w in refs)


def test_package_job_mistakes() -> None:
    report = _report("package-job.yaml")
    assert report.kind == "Job"
    rules = {w.rule for w in report.warnings}
    assert {"secret-on-command-line", "kit-image", "kubectl-in-pod"} <= rules
    [image] = [w for w in report.warnings if w.rule == "kit-image"]
    assert "ghcr.io/kitops-ml/kitops:latest" in image.message


@pytest.mark.parametrize(
    ("command", "flagged"),
    [
        (["sh", "-c", "kit login reg.io -u me -p $PASS && kit push reg.io/m:v1"], True),
        (["sh", "-c", "k'i't lo\\gin reg.io --password=$PASS"], True),  # quotes and escapes hide nothing
        (["kit", "login", "reg.io", "--password", "x"], True),
        (["sh", "-c", "echo $PASS | kit login reg.io -u me --password-stdin"], False),
        (["python", "train.py", "--kit", "--login", "-p", "3"], False),  # not kit's own login
        (["python", "-c", "pass"], False),
    ],
)
def test_a_kit_password_on_the_command_line_is_flagged(command: list[str], flagged: bool) -> None:
    doc = minimal("PyTorchJob")
    doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"] = command
    [report] = validate(doc)
    assert any(w.rule == "secret-on-command-line" for w in report.warnings) is flagged, _warnings(report)


def test_tfjob_multiworker_is_clean() -> None:
    report = _report("tfjob-multiworker.yaml")
    assert report.ok and report.warnings == []
