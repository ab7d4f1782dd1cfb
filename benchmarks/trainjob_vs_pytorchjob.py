"""The digits training (``dags/code/train.py``) on 2 nodes, three ways, same run, same epochs:

1. plain ``torchrun`` — 2 launcher processes (nnodes=2, one rank each) on 127.0.0.1, started directly;
2. a Training Operator v1 PyTorchJob (Master + Worker) on the embedded control plane;
3. a Trainer v2 TrainJob on ``torch-distributed`` (numNodes 2) on the same control plane.

    PYTHONPATH=src python benchmarks/trainjob_vs_pytorchjob.py [--epochs 10] [--rounds 3]

Times are submit → finished (the job's ``Succeeded`` / ``Complete`` condition seen by polling every
50 ms), against the launchers' wall time; prints the medians and the ratios to torchrun (target:
TrainJob within 1.05x). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config

from airflow_provider_training.embedded import start, stop

sys.path.insert(0, str(Path(__file__).parent))
import _torchrun
from _torchrun import TRAIN


def wait_condition(get: Any, condition: str, timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        conditions = (get().get("status") or {}).get("conditions") or []
        if any(c["type"] == "Failed" and c["status"] == "True" for c in conditions):
            raise RuntimeError(f"the job failed: {conditions}")
        if any(c["type"] == condition and c["status"] == "True" for c in conditions):
            return
        time.sleep(0.05)
    raise TimeoutError(condition)


def pytorchjob(custom: Any, name: str, epochs: int, out: Path) -> float:
    cmd = _torchrun.in_job(epochs, out)
    replica = {
        "replicas": 1,
        "restartPolicy": "OnFailure",
        "template": {"spec": {"containers": [{"name": "pytorch", "image": "python:3.11", "command": cmd}]}},
    }
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": dict(replica)}},
    }
    t0 = time.perf_counter()
    custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", body)
    wait_condition(
        lambda: custom.get_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", name), "Succeeded"
    )
    return time.perf_counter() - t0


def trainjob(custom: Any, name: str, epochs: int, out: Path) -> float:
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": 2,
                "command": ["torchrun", str(TRAIN)],
                "args": [f"--epochs={epochs}", f"--output={out}"],
            },
        },
    }
    t0 = time.perf_counter()
    custom.create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", "default", "trainjobs", body)
    wait_condition(
        lambda: custom.get_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", "default", "trainjobs", name),
        "Complete",
    )
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-trainjob-"))
    plane = start(home)
    try:
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
        custom = client.CustomObjectsApi(client.ApiClient(configuration))
        times: dict[str, list[float]] = {"torchrun": [], "PyTorchJob": [], "TrainJob": []}
        for i in range(args.rounds):  # interleaved, so load changes hit all three alike
            out = Path(tempfile.mkdtemp())
            times["torchrun"].append(_torchrun.directly(2, args.epochs, out))
            times["PyTorchJob"].append(pytorchjob(custom, f"pj-{i}", args.epochs, out))
            times["TrainJob"].append(trainjob(custom, f"tj-{i}", args.epochs, out))
        base = statistics.median(times["torchrun"])
        print(f"## digits training, 2 nodes x 1 rank, {args.epochs} epochs, {args.rounds} rounds (median s)")
        for what, values in times.items():
            median = statistics.median(values)
            print(
                f"{what:<11} {median:7.2f} s   ratio to torchrun {median / base:.3f}   ({', '.join(f'{v:.2f}' for v in values)})"
            )
    finally:
        stop(home, replicas=True)


if __name__ == "__main__":
    main()
