"""``scale.py``'s podstartup section: Kubernetes' pod startup SLO as upstream measures it, on the one
embedded node.

The SLO (p99 ≤ 5 s) is for *schedulable stateless pods in a cluster sized for its load*: the
density and load tests run at most 30 pods per node, and the SLI excludes image pulls, measured
from a pod's creation to its start observed through a watch. So: a private daemon, its node
saturated with ``SATURATING`` long-running pods (``sleep``) as the density test does; then, at each
of several steady rates, single-pod workloads (a bare Pod of ``true``, restartPolicy Never) created
one by one on a schedule for ``seconds`` each. The pods of a step finish at once, so the node stays
at about 30 running; they are deleted between the steps (untimed). Pod startup: from the pod's
``ADDED`` to its first state past ``Pending``, both on one watch of the namespace (as the burst
section measures it). Reported per rate: the rate achieved, p50 / p99 / max, the 1-minute load
average, and which rates keep p99 ≤ 5 s.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks._apiserver_common import cleanup, stop_all
from benchmarks._scale_burst import PodWatch, _http, percentile
from tests.waiting import wait_for

NAMESPACE = "podstartup"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
SATURATING = 30  # pods per node in Kubernetes' density / load tests
SLO = 5.0
CLIENTS = 4


def pod(name: str, command: list[str], role: str) -> dict[str, Any]:
    container = {"name": "main", "image": "python:3.11", "command": command}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"scale-benchmark": "podstartup", "role": role}},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [container]},
    }


def run_podstartup(rates: list[float], seconds: float) -> dict[str, Any]:
    from benchmarks._scale_deferred import server_errors
    from tests.fixtures.control_plane import FAST_SETTINGS

    from airflow_provider_training.embedded import start

    home = Path(tempfile.mkdtemp(prefix="scale-podstartup-"))  # cleanup() removes it
    plane = start(home, env=FAST_SETTINGS)
    result: dict[str, Any] = {"saturating": SATURATING, "seconds": seconds, "rates": []}
    watch: PodWatch | None = None
    try:
        with _http(plane) as http:
            http.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}}).raise_for_status()
            errors0 = server_errors(plane)
            watch = PodWatch(plane, PODS)
            time.sleep(1.0)  # the watch is open
            sleepers = [f"sleeper-{i}" for i in range(SATURATING)]
            for name in sleepers:
                http.post(PODS, json=pod(name, ["sleep", "3600"], "sleeper")).raise_for_status()
            wait_for(
                lambda: set(sleepers) <= set(watch.started), 120, f"{SATURATING} sleeping pods running", interval=0.2
            )
            for rate in rates:
                result["rates"].append(_step(plane, watch, rate, seconds))
                # the step's pods are done: deleted (untimed), so each step starts from the same 30
                http.delete(PODS, params={"labelSelector": "role=workload"})
                wait_for(lambda: _count(http, "role=workload") == 0, 60, "the step's pods to go", interval=0.2)
            result["errors_5xx"] = server_errors(plane) - errors0
            result["running_at_end"] = _count(http, "role=sleeper", "Running")
    finally:
        if watch is not None:
            watch.stop()
        result["leaked_processes"] = len(stop_all(home))
        cleanup(home)
    ok = [r["rate"] for r in result["rates"] if r["p99"] <= SLO and r["measured"] == r["created"]]
    result["max_rate_within_slo"] = max(ok) if ok else 0.0
    print_podstartup(result)
    return result


def _count(http: Any, selector: str, phase: str = "") -> int:
    items = http.get(PODS, params={"labelSelector": selector}).json()["items"]
    return sum(not phase or (item.get("status") or {}).get("phase") == phase for item in items)


def _step(plane: Any, watch: PodWatch, rate: float, seconds: float) -> dict[str, Any]:
    """Create single-pod workloads at ``rate`` per second for ``seconds`` on a schedule, from
    ``CLIENTS`` clients taking turns (one client's POSTs, one after another, could not keep the
    higher rates), a late POST not pushing the next ones back; wait until each was seen to start."""
    count = max(1, round(rate * seconds))
    names = [f"w{rate:g}-{i}".replace(".", "p") for i in range(count)]
    load0 = os.getloadavg()[0]
    started = time.monotonic()

    def client(k: int) -> None:
        with _http(plane) as http:
            for i in range(k, count, CLIENTS):
                time.sleep(max(0.0, started + i / rate - time.monotonic()))
                http.post(PODS, json=pod(names[i], ["true"], "workload")).raise_for_status()

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))
    took = time.monotonic() - started
    deadline = time.monotonic() + 60 + seconds
    while not set(names) <= set(watch.started) and time.monotonic() < deadline:
        time.sleep(0.2)
    latencies = [watch.started[n] - watch.added[n] for n in names if n in watch.started and n in watch.added]
    return {
        "rate": rate,
        "achieved": count / took if took > 0 else float("inf"),
        "created": count,
        "measured": len(latencies),
        "p50": statistics.median(latencies) if latencies else float("nan"),
        "p99": percentile(latencies, 99),
        "max": max(latencies) if latencies else float("nan"),
        "load": max(load0, os.getloadavg()[0]),
    }


def print_podstartup(r: dict[str, Any]) -> None:
    if not r["rates"]:
        return
    print(
        f"\n## pod startup at steady rates, {r['saturating']} long-running pods on the node "
        f"({r['seconds']:.0f} s per rate)"
    )
    print("| pods/s asked (achieved) | pods | startup p50 / p99 / max | SLO p99 ≤ 5 s | load (1 min) |")
    print("|---|---|---|---|---|")
    for s in r["rates"]:
        verdict = "met" if s["p99"] <= SLO and s["measured"] == s["created"] else "NOT met"
        print(
            f"| {s['rate']:g} ({s['achieved']:.1f}) | {s['measured']}/{s['created']} "
            f"| {s['p50']:.2f} / {s['p99']:.2f} / {s['max']:.2f} s | {verdict} | {s['load']:.1f} |"
        )
    print(
        f"highest rate with p99 ≤ 5 s: {r['max_rate_within_slo']:g} pods/s; 5xx: {r.get('errors_5xx')}; "
        f"node processes left after stop --all: {r['leaked_processes']}"
    )
