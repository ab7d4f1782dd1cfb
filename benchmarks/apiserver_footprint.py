"""Daemon memory with 10,000 stored pods (after serving a full list) and idle CPU, against the same
daemon with an empty store, measured in the same run.

    PYTHONPATH=src python benchmarks/apiserver_footprint.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).parent))
from _apiserver_common import N_OBJECTS, cleanup, exit_on_sigterm, seeded_daemon

IDLE_SECONDS = 10.0


def measure(n: int) -> tuple[float, float]:
    plane = seeded_daemon(n)
    try:
        with httpx.Client(
            base_url=plane.api_url, verify=str(plane.ca), timeout=60, headers={"Authorization": f"Bearer {plane.token}"}
        ) as http:
            for _ in range(3):
                http.get("/api/v1/pods").raise_for_status()
                http.get("/api/v1/pods", params={"labelSelector": "training.kubeflow.org/job-name=job1"})
        process = psutil.Process(plane.pid)
        rss = process.memory_info().rss / 2**20
        process.cpu_percent(None)
        time.sleep(IDLE_SECONDS)
        idle = process.cpu_percent(None)
        return rss, idle
    finally:
        cleanup(plane.home)  # the daemon, its node's processes, its directory


def main() -> None:
    exit_on_sigterm()
    empty_rss, empty_cpu = measure(0)
    full_rss, full_cpu = measure(N_OBJECTS)
    print(f"daemon RSS, empty store:        {empty_rss:7.1f} MiB   idle CPU {empty_cpu:5.2f}% of a core")
    print(
        f"daemon RSS, {N_OBJECTS} pods:     {full_rss:7.1f} MiB   idle CPU {full_cpu:5.2f}% of a core "
        f"(over {IDLE_SECONDS:.0f}s)"
    )
    print(f"ratio RSS full/empty: x{full_rss / empty_rss:.2f}")
    print(
        f"goals: RSS < 200 MiB {'met' if full_rss < 200 else 'NOT met'}; "
        f"idle CPU < 1% {'met' if full_cpu < 1 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
