"""``scale.py``'s store section: a daemon whose store holds N objects — 20 % PyTorchJobs (driven:
``runPolicy.managedBy`` names another controller, so none runs), 60 % their pods (bound to a node
that is not this daemon's: API objects, never processes), 20 % Events about them.

Measured: daemon start time on that store (``embedded start`` until it serves; beside it the start
on an empty store, in the same run), list latency p50/p99 — a job's pods by label selector (the
operator's and kubectl's everyday list), one page of 500 (``limit``), every pod a page at a time
(``limit`` + ``continue``), every pod at once, every job at once — against the SLO's 1 s per object
/ 5 s per namespace (a namespace here holds every object), and the store's size on disk.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from benchmarks._apiserver_common import ELSEWHERE, cleanup

from airflow_provider_training.embedded import start
from airflow_provider_training.embedded.store import Store

NAMESPACE = "default"
PODS_PER_JOB = 3
BATCH = 1000


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _job(i: int) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["python", "train.py"]}
    spec = {"replicas": 1, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": f"job{i}", "namespace": NAMESPACE, "labels": {"team": f"team{i % 20}"}},
        "spec": {"runPolicy": {"managedBy": "scale.example.com/elsewhere"},
                 "pytorchReplicaSpecs": {"Master": spec, "Worker": {**spec, "replicas": PODS_PER_JOB - 1}}},
        "status": {"conditions": [{"type": "Running", "status": "True", "reason": "PyTorchJobRunning",
                                   "lastUpdateTime": _now(), "lastTransitionTime": _now()}]},
    }  # fmt: skip


def _pod(job: int, index: int) -> dict[str, Any]:
    rtype = "master" if index == 0 else "worker"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"job{job}-{rtype}-{index}",
            "namespace": NAMESPACE,
            "labels": {"training.kubeflow.org/job-name": f"job{job}", "training.kubeflow.org/replica-type": rtype},
        },
        "spec": {"nodeName": ELSEWHERE, "containers": [{"name": "pytorch", "image": "python:3.11",
                                                        "command": ["python", "train.py", "--epochs=10"]}]},
        "status": {"phase": "Running"},
    }  # fmt: skip


def _event(job: int, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"job{job}.{i:08x}", "namespace": NAMESPACE},
        "involvedObject": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": f"job{job}",
                           "namespace": NAMESPACE},
        "reason": "SuccessfulCreatePod", "message": f"Created pod: job{job}-worker-{i}", "type": "Normal",
        "source": {"component": "pytorchjob-controller"}, "count": 1,
        "firstTimestamp": _now(), "lastTimestamp": _now(),
    }  # fmt: skip


def seed(path: Path, n: int) -> dict[str, int]:
    """A store of about ``n`` objects at ``path``; how many of each."""
    jobs = max(1, n // (1 + PODS_PER_JOB + 1))
    store = Store(path)
    try:
        for first in range(0, jobs, BATCH):
            block = range(first, min(jobs, first + BATCH))
            store.create_many("kubeflow.org/pytorchjobs", [_job(i) for i in block])
            store.create_many("core/pods", [_pod(i, k) for i in block for k in range(PODS_PER_JOB)])
            store.create_many("core/events", [_event(i, 0) for i in block])
    finally:
        store.close()
    return {"jobs": jobs, "pods": jobs * PODS_PER_JOB, "events": jobs}


def _size(home: Path) -> int:
    return sum(p.stat().st_size for p in home.glob("store.db*"))


def _timed(fn: Any, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def _p(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def run_store(n: int) -> dict[str, Any]:
    result: dict[str, Any] = {"objects": n}
    homes = [Path(tempfile.mkdtemp(prefix="scale-store-empty-")), Path(tempfile.mkdtemp(prefix="scale-store-"))]
    try:
        started = time.monotonic()
        start(homes[0], timeout=300)
        result["start_empty_s"] = time.monotonic() - started
        cleanup(homes[0])
        started = time.monotonic()
        result["counts"] = seed(homes[1] / "store.db", n)
        result["seed_s"] = time.monotonic() - started
        started = time.monotonic()
        plane = start(homes[1], timeout=600)
        result["start_s"] = time.monotonic() - started
        time.sleep(2)  # the controllers' first sync settles
        pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
        jobs_url = f"/apis/kubeflow.org/v1/namespaces/{NAMESPACE}/pytorchjobs"
        with httpx.Client(
            base_url=plane.api_url,
            verify=str(plane.ca),
            headers={"Authorization": f"Bearer {plane.token}"},
            timeout=300,
        ) as http:
            jobs = result["counts"]["jobs"]

            def selector() -> None:
                job = f"job{int(time.perf_counter() * 1e6) % jobs}"
                got = http.get(pods, params={"labelSelector": f"training.kubeflow.org/job-name={job}"})
                assert len(got.json()["items"]) == PODS_PER_JOB, got.text[:300]

            def paged() -> int:
                pages, token = 0, ""
                while True:
                    page = http.get(pods, params={"limit": 500, **({"continue": token} if token else {})}).json()
                    pages += 1
                    token = page["metadata"].get("continue") or ""
                    if not token:
                        return pages

            page_times: list[float] = []

            def paged_timed() -> None:
                token = ""
                while True:
                    t0 = time.perf_counter()
                    page = http.get(pods, params={"limit": 500, **({"continue": token} if token else {})}).json()
                    page_times.append(time.perf_counter() - t0)
                    token = page["metadata"].get("continue") or ""
                    if not token:
                        return

            result["lists"] = {
                f"a job's pods by label selector ({PODS_PER_JOB})": _timed(selector, 200),
                "first page (limit=500)": _timed(lambda: http.get(pods, params={"limit": 500}).json(), 50),
                f"every pod, {paged()} pages of 500 (limit+continue)": _timed(paged_timed, 3),
                "  one page of those": page_times,
                f"every pod at once ({result['counts']['pods']:,})": _timed(lambda: http.get(pods).json(), 3),
                f"every job at once ({jobs:,})": _timed(lambda: http.get(jobs_url).json(), 3),
            }
        result["store_mib"] = _size(homes[1]) / 2**20
    finally:
        for home in homes:
            if home.exists():
                cleanup(home)
    print_store(result)
    return result


def print_store(r: dict[str, Any]) -> None:
    if "lists" not in r:
        return
    c = r["counts"]
    print(f"\n## store of {sum(c.values()):,} objects ({c['jobs']:,} jobs, {c['pods']:,} pods, {c['events']:,} Events)")
    print(f"daemon start: {r['start_s']:.1f} s (empty store: {r['start_empty_s']:.1f} s); "
          f"seeded in {r['seed_s']:.0f} s; store on disk {r['store_mib']:.0f} MiB "
          f"({r['store_mib'] * 2**20 / sum(c.values()) / 1024:.1f} KiB/object)")  # fmt: skip
    print("| list | n | p50 ms | p99 ms | SLO |")
    print("|---|---|---|---|---|")
    for label, samples in r["lists"].items():
        p50, p99 = _p(samples)
        slo = "1 s/object" if "selector" in label else "5 s/namespace"
        print(f"| {label} | {len(samples)} | {p50 * 1000:.0f} | {p99 * 1000:.0f} | {slo}: {'met' if p99 < (1 if 'selector' in label else 5) else 'NOT met'} |")  # fmt: skip
