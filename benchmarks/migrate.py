"""``airflow-training migrate`` and ``validate`` per document: a baseline commit against this tree,
side by side in one run, on the same files (issue 25 item 15: migrate at least 10x faster).

    python benchmarks/migrate.py [--documents 1000] [--baseline 9e625a4] [--rounds 2] [--kinds all]

The baseline's ``src`` is exported with ``git archive`` into a temporary directory and run from
there; each command runs as a fresh ``python -m airflow_provider_training.cli`` process, as a user
runs it. Per-document time is (CPU time for N documents - CPU time for 1 document) / (N - 1), so the
interpreter's start and the imports are left out; each side takes the best of ``--rounds``,
alternating old and new. The outputs of both sides must be byte-identical (checked, reported).
Not part of the test suite.

Inputs: N PyTorchJobs (Master 1 + Worker 2, restartPolicy Never: each gets a generated
TrainingRuntime, the heavier path), or with ``--kinds all`` N jobs cycling through the seven v1 kinds.
``validate`` runs on the v1 file and on the migrated output (N TrainJobs and their runtimes).
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
# The replica types of a small valid job of each kind (as tests/factories.py's TOPOLOGY).
TOPOLOGY = {
    "PyTorchJob": ("pytorchReplicaSpecs", "pytorch", {"Master": 1, "Worker": 2}),
    "TFJob": ("tfReplicaSpecs", "tensorflow", {"Chief": 1, "Worker": 2}),
    "MPIJob": ("mpiReplicaSpecs", "mpi", {"Launcher": 1, "Worker": 2}),
    "XGBoostJob": ("xgbReplicaSpecs", "xgboost", {"Master": 1, "Worker": 2}),
    "PaddleJob": ("paddleReplicaSpecs", "paddle", {"Worker": 2}),
    "MXJob": ("mxReplicaSpecs", "mxnet", {"Scheduler": 1, "Server": 1, "Worker": 2}),
    "JAXJob": ("jaxReplicaSpecs", "jax", {"Worker": 2}),
}


def job(kind: str, name: str) -> dict[str, Any]:
    field, container, replicas = TOPOLOGY[kind]
    template = {
        "spec": {"containers": [{"name": container, "image": "python:3.11", "command": ["python", "-c", "pass"]}]}
    }
    specs = {
        rtype: {"replicas": count, "restartPolicy": "Never", "template": copy.deepcopy(template)}
        for rtype, count in replicas.items()
    }
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name}, "spec": {field: specs}}


def write_jobs(path: Path, count: int, kinds: list[str]) -> Path:
    path.write_text(yaml.safe_dump_all([job(kinds[i % len(kinds)], f"job-{i}") for i in range(count)]))
    return path


def export(ref: str, into: Path) -> Path:
    """The baseline's ``src`` tree, from ``git archive`` (no worktree left behind)."""
    archive = into / "src.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), ref, "src"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def run(src: Path, args: list[str]) -> tuple[float, bytes]:
    """CPU seconds (user + system) of one command, and its output. CPU rather than wall time: on a
    machine shared with other work, wall time measures the neighbours as much as the command."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "airflow_provider_training.cli", *args], env=env, capture_output=True, timeout=1800
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    elapsed = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{src}: {args}: exit {done.returncode}: {done.stderr.decode()[-2000:]}")
    return elapsed, done.stdout + b"\n--stderr--\n" + done.stderr


def compare(
    sides: tuple[Path, Path], command: str, one: Path, many: Path, count: int, rounds: int
) -> tuple[list[float], list[bytes]]:
    """Per-document seconds and the output of ``many`` for each side, rounds alternating the sides."""
    best_one = [float("inf")] * len(sides)
    best_many = [float("inf")] * len(sides)
    outputs = [b""] * len(sides)
    for _ in range(rounds):
        for i, src in enumerate(sides):
            best_one[i] = min(best_one[i], run(src, [command, "-f", str(one)])[0])
            elapsed, outputs[i] = run(src, [command, "-f", str(many)])
            best_many[i] = min(best_many[i], elapsed)
    return [(m - o) / (count - 1) for m, o in zip(best_many, best_one, strict=True)], outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--baseline", default="9e625a4", help="the commit to compare with (default: 9e625a4)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kinds", choices=("pytorch", "all"), default="pytorch")
    args = parser.parse_args()
    kinds = list(TOPOLOGY) if args.kinds == "all" else ["PyTorchJob"]
    with tempfile.TemporaryDirectory(prefix="bench-migrate-") as tmp:
        work = Path(tmp)
        old_src, new_src = export(args.baseline, work), ROOT / "src"
        one = write_jobs(work / "one.yaml", 1, kinds)
        many = write_jobs(work / "many.yaml", args.documents, kinds)
        migrated = work / "migrated.yaml"
        migrated_one = work / "migrated-one.yaml"
        migrated_one.write_bytes(stdout(run(new_src, ["migrate", "-f", str(one)])[1]))
        migrated.write_bytes(stdout(run(new_src, ["migrate", "-f", str(many)])[1]))
        print(f"{args.documents} documents ({', '.join(kinds)}); baseline {args.baseline}; best of {args.rounds}")
        print(f"{'command':<28}{'baseline ms/doc':>16}{'this tree ms/doc':>18}{'ratio':>8}  outputs")
        for label, command, small, large in (
            ("migrate", "migrate", one, many),
            ("validate (v1 jobs)", "validate", one, many),
            ("validate (migrated output)", "validate", migrated_one, migrated),
        ):
            (old, new), (old_out, new_out) = compare(
                (old_src, new_src), command, small, large, args.documents, args.rounds
            )
            same = "identical" if old_out == new_out else "DIFFERENT"
            print(f"{label:<28}{old * 1000:>16.2f}{new * 1000:>18.2f}{old / new:>7.1f}x  {same}", flush=True)


def stdout(output: bytes) -> bytes:
    return output.split(b"\n--stderr--\n")[0]


if __name__ == "__main__":
    main()
