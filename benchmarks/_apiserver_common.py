"""Helpers shared by the API server benchmarks: a private daemon with N stored objects, and its
removal with everything it started.

The stored pods are bound to another node (``spec.nodeName``), so the daemon's node agent leaves
them alone as a kubelet leaves other nodes' pods: they are API objects to read, never processes.
(Unbound, each of the 10,000 would get a pod supervisor — once thousands of processes that
outlived the benchmark and choked the machine.) ``cleanup`` stops the daemon with every supervisor
it recorded, checks that none is left, and removes its directory."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from airflow_provider_training.embedded import ControlPlane, start, stop
from airflow_provider_training.embedded.store import Store

N_OBJECTS = 10_000
GROUP_SIZE = 10  # pods per job label value: a label selector narrows a list to this many
ELSEWHERE = "benchmark-elsewhere"  # a node that is not this daemon's: its pods are never run here


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
            "nodeName": ELSEWHERE,
            "containers": [
                {
                    "name": "pytorch",
                    "image": "python:3.11",
                    "command": ["python", "train.py", "--epochs=10"],
                    "env": [{"name": "WORLD_SIZE", "value": "4"}],
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def seeded_daemon(n: int = N_OBJECTS, env: dict[str, str] | None = None) -> ControlPlane:
    """A daemon on a fresh directory whose store holds ``n`` pods (bound elsewhere: none runs).
    The caller removes it with ``cleanup(plane.home)`` in a ``finally``."""
    home = Path(tempfile.mkdtemp(prefix="apt-bench-"))
    store = Store(home / "store.db")
    for i in range(n):
        store.create("core/pods", pod(i))
    store.close()
    try:
        return start(home, env=env, timeout=300)
    except BaseException:
        cleanup(home)
        raise


def exit_on_sigterm() -> None:
    """SIGTERM (``timeout``, ``kill``) ends the run through its ``finally`` blocks, so what it
    started is stopped as after Ctrl-C, rather than left running by Python's default."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))


def pods_run(home: str | os.PathLike[str]) -> int:
    """How many pods the daemon's node agent has started (its supervisor directories)."""
    pods = Path(home) / "node" / "pods"
    return sum(1 for _ in pods.iterdir()) if pods.is_dir() else 0


def stop_all(home: str | os.PathLike[str]) -> list[int]:
    """``embedded stop --all`` for ``home``; the node processes still there 10 s later (a leak)."""
    stop(home, replicas=True)
    deadline = time.monotonic() + 10  # the zygote and its spares end once the daemon's pipe closes
    while (left := node_processes(home)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def cleanup(home: str | os.PathLike[str]) -> None:
    """Stop the daemon of ``home`` and every pod supervisor it started (``embedded stop --all``),
    then remove the directory. Raises if a supervisor outlived the stop."""
    try:
        if left := stop_all(home):
            for pid in left:  # this run's own processes (its directory is in their command line)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            raise RuntimeError(f"{len(left)} node processes of {home} outlived `embedded stop --all`: {left[:10]}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def node_processes(home: str | os.PathLike[str]) -> list[int]:
    """The node processes of ``home`` still running (supervisors, the zygote and its spares)."""
    pids = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            cmdline = _cmdline(int(entry.name))
            if "entry.py" in cmdline and str(home) in cmdline:
                pids.append(int(entry.name))
    return pids


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


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
