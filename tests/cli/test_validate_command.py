"""``airflow-training validate`` as a user runs it: a real process, exit codes, printed findings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.factories import minimal
from tests.paths import SEED


def _run(*args: str, stdin: str | None = None, command: str = "validate") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_training.cli", command, *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def test_valid_file_exits_zero_and_prints_warnings() -> None:
    result = _run("-f", str(SEED / "pytorch-mnist-ddp.yaml"))
    assert result.returncode == 0, result.stderr
    assert "PyTorchJob kubeflow/pytorch-mnist-ddp: valid" in result.stdout
    assert "warning: spec.cleanPodPolicy: unknown field" in result.stdout


def test_strict_turns_unknown_fields_into_errors() -> None:
    result = _run("--strict", "-f", str(SEED / "pytorch-mnist-ddp.yaml"))
    assert result.returncode == 1
    assert "error: spec.cleanPodPolicy: unknown field" in result.stdout
    assert "1 invalid document(s)" in result.stderr


def test_several_files_and_every_error(tmp_path: Path) -> None:
    bad = minimal("PyTorchJob", name="Bad_Name")
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump_all([minimal("TFJob", "fine"), bad]))
    result = _run("-f", str(path), "-f", str(SEED / "tfjob-multiworker.yaml"))
    assert result.returncode == 1
    out = result.stdout
    assert f"{path}#1: TFJob fine: valid" in out
    assert f"{path}#2: PyTorchJob Bad_Name: INVALID" in out
    assert "error: spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1" in out
    assert 'error: metadata.name: Invalid value: "Bad_Name"' in out
    assert "tfjob-multiworker.yaml: TFJob tensorflow-multiworker-job: valid (0 error(s), 0 warning(s))" in out


def _refused(path: Path, text: str) -> str:
    """What ``validate`` prints for a file of ``text`` it refuses (exit 1, the file named)."""
    path.write_text(text)
    result = _run("-f", str(path))
    assert result.returncode == 1
    assert str(path) in result.stdout
    return result.stdout


def test_malformed_yaml_reports_line_and_column(tmp_path: Path) -> None:
    assert "line 3, column 1" in _refused(tmp_path / "broken.yaml", "kind: PyTorchJob\nspec: [\n")


def test_reads_stdin() -> None:
    result = _run("-f", "-", stdin=yaml.safe_dump(minimal("JAXJob")))
    assert result.returncode == 0
    assert "JAXJob job1: valid" in result.stdout


def test_a_file_with_no_documents_is_an_error_naming_it(tmp_path: Path) -> None:
    for text in ("", "---\n", "---\n---\n"):
        path = tmp_path / "empty.yaml"
        path.write_text(text)
        for command in ("validate", "migrate"):
            proc = _run("-f", str(path), command=command)
            assert proc.returncode == 1, (command, text, proc.stdout, proc.stderr)
            assert f"{path}: no documents" in proc.stderr


def test_a_recursive_alias_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    out = _refused(tmp_path / "loop.yaml", "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nspec:\n  a: &a [*a]\n")
    assert "line 4: recursive alias" in out
    assert "Unsupported value" not in out


def test_documents_per_file_are_capped_and_refused_fast(tmp_path: Path) -> None:
    import time

    path = tmp_path / "many.yaml"
    path.write_text("---\n" * 500_000)
    started = time.monotonic()
    proc = _run("-f", str(path))
    elapsed = time.monotonic() - started
    assert proc.returncode == 1
    assert f"{path}" in proc.stdout + proc.stderr and "more than 10000 YAML documents" in proc.stdout + proc.stderr
    assert elapsed < 15, elapsed


def test_a_job_larger_than_the_embedded_control_plane_runs_is_a_warning(tmp_path: Path) -> None:
    """A cluster takes it (exit 0); the embedded control plane would refuse it, and says how to
    raise its limit (issue 25 item 1)."""
    path = tmp_path / "big.yaml"
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "million"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1_000_000}},
    }
    path.write_text(yaml.safe_dump(trainjob))
    result = _run("-f", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "TrainJob million: valid (0 error(s), 1 warning(s))" in result.stdout
    assert (
        "warning: spec.trainer.numNodes: the embedded control plane would refuse this: Invalid value: 1000000: "
        "this TrainJob would run 1000000 pods at once" in result.stdout
    )
    assert "AIRFLOW_TRAINING_MAX_PODS_PER_JOB" in result.stdout
    raised = subprocess.run(
        [sys.executable, "-m", "airflow_provider_training.cli", "validate", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "AIRFLOW_TRAINING_MAX_PODS_PER_JOB": "2000000"},
    )
    assert "0 warning(s)" in raised.stdout, raised.stdout
