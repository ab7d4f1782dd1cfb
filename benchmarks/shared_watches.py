"""N deferred training tasks in one triggerer-like process: a watch per task (the trigger before shared
watches) against the shared watch (``client/informer.py``), side by side in one run, on one embedded
control plane.

For each way a child process runs N waits on one event loop, as the triggerer runs triggers:

- ``per-task``: what ``TrainingJobTrigger.run`` did before — a client of its own and
  ``AsyncTrainingJobClient.wait`` (a watch of the one job) per task;
- ``shared``: ``TrainingJobTrigger.run`` now (``AsyncTrainingHook.wait`` → the process's informer).

Measured from the API server's side (``/metrics``): open watch connections and requests per second
over an idle window; in the child: RSS growth for the N waits and CPU seconds over the idle window;
then 10 % of the jobs are marked Succeeded at once and job-finished → trigger event p50 / p99.

    PYTHONPATH=src:. python benchmarks/shared_watches.py [--n 200] [--idle 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODES = ("per-task", "shared")
WATCH_TIMEOUT = 240.0  # the triggers' default: each watch is renewed once per this many seconds
CHILD = r"""
import asyncio, json, os, sys, time
import psutil
from airflow_provider_training.triggers import TrainingJobTrigger, lazy

config = json.loads(sys.argv[1])
process = psutil.Process()

def say(**what):
    print(json.dumps(what), flush=True)

async def per_task(name, uid):
    from airflow_provider_training.hooks.training import AsyncTrainingHook
    hook = AsyncTrainingHook(kubernetes_conn_id=None, connection_extras={"kube_config_path": config["kubeconfig"]})
    async with hook.get_client() as jobs:
        await jobs.wait("PyTorchJob", name, config["namespace"], uid=uid)

async def shared(name, uid):
    trigger = TrainingJobTrigger("PyTorchJob", name, config["namespace"], uid, kubernetes_conn_id=None,
                                 connection_extras={"kube_config_path": config["kubeconfig"]}, not_before=0.0)
    async for _ in trigger.run():
        return

async def main():
    await lazy.load()
    import airflow_provider_training.hooks.training  # noqa: F401  (both ways pay the same imports)
    rss0 = process.memory_info().rss
    fired = {}
    wait = per_task if config["mode"] == "per-task" else shared

    async def one(name, uid):
        await wait(name, uid)
        fired[name] = time.time()

    tasks = [asyncio.create_task(one(n, u)) for n, u in config["jobs"]]
    await asyncio.sleep(config["settle"])
    say(phase="ready", rss0=rss0, failed=sum(t.done() for t in tasks))
    while line := await asyncio.to_thread(sys.stdin.readline):
        if line.strip() == "done":
            break
        cpu = process.cpu_times()
        say(phase="marked", cpu=cpu.user + cpu.system, rss=process.memory_info().rss)
    say(phase="result", fired=fired)
    for task in tasks:
        task.cancel()

asyncio.run(main())
"""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def run_mode(mode: str, plane: Any, namespace: str, jobs: list[tuple[str, str]], args: Any, driver: Any) -> dict:
    from tests.apimetrics import open_watches, requests

    env = {**os.environ, "AIRFLOW__TRAINING__DEFER_SETTLE_SECONDS": "0"}
    config = {"mode": mode, "kubeconfig": str(plane.kubeconfig), "namespace": namespace, "jobs": jobs,
              "settle": args.settle}  # fmt: skip
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdin is not None and child.stdout is not None

    def read() -> dict:
        line = child.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise SystemExit(f"the {mode} child ended early (exit {child.wait()})")
        return dict(json.loads(line))

    def mark() -> dict:
        child.stdin.write("mark\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        return read()

    try:
        ready = read()
        expected = len(jobs) if mode == "per-task" else 1
        deadline = time.monotonic() + 180
        # until every wait has opened its watch (500 TLS handshakes take a while on 2 busy cores)
        while (watches := open_watches(plane.kubeconfig, "pytorchjobs")) < expected and time.monotonic() < deadline:
            time.sleep(1.0)
        before = requests(plane.kubeconfig)
        first = mark()
        time.sleep(args.idle)
        last = mark()
        idle_requests = requests(plane.kubeconfig) - before
        finishing = jobs[: max(1, len(jobs) // 10)]
        written: dict[str, float] = {}
        for name, _ in finishing:
            driver.succeed("PyTorchJob", name, namespace)
            written[name] = time.time()
        time.sleep(args.settle)
        child.stdin.write("done\n")
        child.stdin.flush()
        result = read()
        child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
    fired = result["fired"]
    latencies = [fired[name] - written[name] for name, _ in finishing if name in fired]
    for name, _ in finishing:  # back to running, for the next way
        driver.start("PyTorchJob", name, namespace)
    return {
        "watches": watches,
        "idle_rps": idle_requests / args.idle,
        "renewals": watches / WATCH_TIMEOUT,  # a window shorter than 240 s may hold none of them
        "rss_mib": (first["rss"] - ready["rss0"]) / 2**20,
        "cpu_idle": last["cpu"] - first["cpu"],
        "fired": f"{len(latencies)}/{len(finishing)}",
        "p50_ms": 1000 * statistics.median(latencies) if latencies else float("nan"),
        "p99_ms": 1000 * percentile(latencies, 99) if latencies else float("nan"),
        "failed_early": ready["failed"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200, help="deferred tasks (jobs) per way")
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of the idle window")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds for the waits to start / events to arrive")
    args = parser.parse_args()
    from kubernetes import client, config
    from tests.factories import simple_job as job
    from tests.fixtures.job_driver import JobDriver

    from airflow_provider_training.embedded import start, stop

    home = Path(tempfile.mkdtemp(prefix="bench-shared-watches-"))
    plane = start(home)
    try:
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
        api = client.ApiClient(configuration)
        driver = JobDriver(api, home)
        custom = client.CustomObjectsApi(api)
        namespace = "default"
        jobs = []
        for i in range(args.n):
            created = custom.create_namespaced_custom_object(
                "kubeflow.org", "v1", namespace, "pytorchjobs", job(name=f"deferred-{i}")
            )
            driver.start("PyTorchJob", f"deferred-{i}", namespace)
            jobs.append((f"deferred-{i}", created["metadata"]["uid"]))
        results = {mode: run_mode(mode, plane, namespace, jobs, args, driver) for mode in MODES}
    finally:
        stop(home)
    load = os.getloadavg()[0]
    print(f"N = {args.n} deferred tasks in one process, idle window {args.idle:g} s, load average {load:.1f}")
    rows = [
        ("watch connections to the API server", "watches", "{:.0f}"),
        ("API requests per second in the idle window", "idle_rps", "{:.2f}"),
        ("watch renewals per second at idle (watches / 240 s)", "renewals", "{:.3f}"),
        ("process RSS growth for the N waits (MiB)", "rss_mib", "{:.1f}"),
        ("process CPU seconds over the idle window", "cpu_idle", "{:.2f}"),
        ("waits that ended before any job finished (errors)", "failed_early", "{}"),
        ("10 % finished at once: events fired", "fired", "{}"),
        ("job-finished -> event p50 (ms)", "p50_ms", "{:.0f}"),
        ("job-finished -> event p99 (ms)", "p99_ms", "{:.0f}"),
    ]
    print(f"| | {' | '.join(MODES)} |")
    print("|---|" + "---|" * len(MODES))
    for label, key, fmt in rows:
        print(f"| {label} | {' | '.join(fmt.format(results[m][key]) for m in MODES)} |")


if __name__ == "__main__":
    main()
