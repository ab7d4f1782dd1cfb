"""Helpers shared by the API server benchmarks: a private daemon with N stored objects."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from airflow_provider_training.embedded import ControlPlane, start
from airflow_provider_training.embedded.store import Store

N_OBJECTS = 10_000
GROUP_SIZE = 10  # pods per job label value: a label selector narrows a list to this many


def pod(i: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"job{i // GROUP_SIZE}-worker-{i % GROUP_SIZE}",
            "namespace": "default",
            "labels": {
                "training.kubeflow.org/job-name": f"job{i // GROUP_SIZE}",
                "training.kubeflow.org/replica-type": "worker",
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "pytorch",
                    "image": "python:3.11",
                    "command": ["python", "train.py", "--epochs=10"],
                    "env": [{"name": "WORLD_SIZE", "value": "4"}],
                }
            ]
        },
        "status": {"phase": "Running"},
    }


def seeded_daemon(n: int = N_OBJECTS) -> ControlPlane:
    home = Path(tempfile.mkdtemp(prefix="apt-bench-"))
    home.mkdir(exist_ok=True)
    store = Store(home / "store.db")
    for i in range(n):
        store.create("core/pods", pod(i))
    store.close()
    return start(home)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


def row(name: str, samples: list[float], baseline: list[float] | None = None) -> str:
    p50, p99 = percentiles(samples)
    text = f"{name:<44} p50 {p50 * 1000:8.3f} ms   p99 {p99 * 1000:8.3f} ms"
    if baseline:
        b50, b99 = percentiles(baseline)
        text += f"   ratio p50 x{p50 / b50:7.1f}  p99 x{p99 / b99:7.1f}"
    return text
