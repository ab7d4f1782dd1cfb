"""Scale, measured against Kubernetes' own SLOs and against cncf.kubernetes (issue 29), on the
embedded control plane of this machine. Each figure is printed beside its anchor from the same run.

    PYTHONPATH=src:. python benchmarks/scale.py [--quick] [--only deferred,burst,podstartup,store,cockpit]
                                               [--n 100,500,1000] [--kpo-n 100,500] [--jobs 1000]
                                               [--rates 5,10,20,40,80] [--rate-seconds 30]
                                               [--objects 50000] [--replicas 64] [--json OUT]

Sections (``--only`` picks some, comma-separated):

- ``deferred`` (``_scale_deferred.py``): N deferred ``TrainingJobOperator`` tasks in the one
  triggerer of a real deployment (api-server, scheduler, dag-processor, triggerer; LocalExecutor),
  jobs driven by a fake controller (``runPolicy.managedBy``); beside them the same N (``--kpo-n``)
  of deferrable ``KubernetesPodOperator`` tasks. Triggerer RSS / CPU at idle, watches, connections
  and requests/s to the API server, job finished → task success when 10 % finish at once.
- ``burst`` (``_scale_burst.py``): ``--jobs`` two-replica PyTorchJobs of ``true`` created at once:
  create → all Succeeded, jobs/s beside the machine's raw spawn rate, pod startup p50/p99 against
  the 5 s SLO, daemon RSS, 5xx, leaked processes; while it runs, 8 clients churn 20 objects/s and
  their API latency p99 per call class is measured against the 1 s SLO (goal 100 ms).
- ``podstartup`` (``_scale_podstartup.py``): the pod startup SLO as upstream measures it: the node
  saturated with 30 long-running pods, then single-pod workloads created at steady rates
  (``--rates``, ``--rate-seconds`` each): startup p50/p99 per rate, the highest rate with p99 ≤ 5 s.
- ``store`` (``_scale_store.py``): a store of ``--objects`` objects (jobs, pods, Events): daemon
  start time, list p99 with and without a label selector and paginated, store size on disk.
- ``cockpit``: ``benchmarks/cockpit.py`` with a ``--replicas``-replica job (first paint, log-line
  latency); needs Debian's chromium. Not part of ``--quick`` (it starts a deployment of its own).

``--quick`` (about 3-4 minutes): N = 10 deferred tasks of each way, a burst of 30 jobs, pod startup
at 2 and 10 pods/s for 8 s each, a store of 2,000 objects. Every daemon and every pod supervisor it starts is stopped in a ``finally``; the run
ends by counting the node processes left on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks._scale_*, tests.fixtures

SECTIONS = ("deferred", "burst", "podstartup", "store", "cockpit")
QUICK = {"n": [10], "kpo_n": [10], "jobs": 30, "objects": 2000, "idle": 5.0, "rates": [2.0, 10.0], "rate_seconds": 8.0}


def node_processes_on_machine() -> int:
    """Pod supervisors (and zygotes) of any embedded node on this machine: ``entry.py`` processes."""
    out = subprocess.run(["ps", "-eo", "cmd"], capture_output=True, text=True, check=False).stdout
    return sum("entry.py" in line for line in out.splitlines())


# The scheduler imports both operators once at its start; its LocalExecutor workers are forked from
# it and fork each task, so a task no longer imports them itself. Without it each of 8 concurrent
# tasks spent 30+ s parsing the DAG file on the loaded 2 cores: 1,000 tasks took hours to defer.
# The triggerer and the other daemons are left as they are (what they cost is what is measured).
PRELOAD = """
import sys
if sys.argv[1:2] == ["scheduler"] or sys.argv[-1:] == ["scheduler"]:
    import airflow_provider_training.operators.training
    import airflow.providers.cncf.kubernetes.operators.pod
"""


def deployment_env(plane: Any) -> dict[str, str]:
    return {
        # the KubernetesPodOperator anchor's connection: the same embedded plane
        "AIRFLOW_CONN_SCALE_KUBERNETES": json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": str(plane.kubeconfig)}}
        ),
        # 30 s (Airflow's default) is too short for 8 workers importing the DAG file at once on 2
        # loaded cores: tasks failed with "DagBag import timeout"
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "300",
        "AIRFLOW__SCHEDULER__MAX_TIS_PER_QUERY": "64",
        "AIRFLOW__TRIGGERER__CAPACITY": "1000",  # Airflow's default, said out loud
    }


def run_deferred(args: argparse.Namespace, results: dict[str, Any]) -> None:
    from benchmarks._scale_deferred import deferred
    from tests.fixtures.airflow_deployment import start_deployment
    from tests.fixtures.control_plane import FAST_SETTINGS

    from airflow_provider_training.embedded import start, stop

    root = Path(tempfile.mkdtemp(prefix="scale-deferred-"))
    plane = start(root / "plane", env=FAST_SETTINGS)
    d = None
    rows: list[dict[str, Any]] = []
    try:
        hook = root / "preload"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(PRELOAD)
        preload = {"PYTHONPATH": f"{hook}:{os.environ.get('PYTHONPATH', '')}"}
        d = start_deployment(
            root / "airflow",
            plane,
            SimpleNamespace(host="127.0.0.1:9"),
            deployment_env(plane),
            asyncio_debug=False,
            daemon_env={"scheduler": preload},
        )
        for way, sizes in (("training", args.n), ("training-resume", args.resume_n), ("kpo", args.kpo_n)):
            if sizes:
                rows += deferred(d, plane, way, sorted(sizes), args.idle, finish=args.finish)
    finally:
        if d is not None:
            d.stop()
        stop(root / "plane", replicas=True)
        shutil.rmtree(root, ignore_errors=True)
    results["deferred"] = rows
    print_deferred(rows, args.idle, args.finish)


WAYS = {
    "training": "TrainingJobOperator",
    "training-resume": "TrainingJobOperator, end_from_trigger=False",
    "kpo": "KubernetesPodOperator",
}


def print_deferred(rows: list[dict[str, Any]], idle: float, finish: float = 0.1) -> None:
    print(f"\n## deferred tasks in one triggerer (idle window {idle:.0f} s; load {os.getloadavg()[0]:.1f})")
    print("| way | N | watches | conns | req/s idle | RSS +MiB | MiB/task since last N | CPU % idle | "
          f"{finish:.0%} finish: fired p50/p99 s | success p50/p99 s | 5xx |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    last: dict[str, tuple[int, float]] = {}
    for r in rows:
        n0, rss0 = last.get(r["way"], (0, 0.0))
        r["mib_per_task"] = (r["rss_mib"] - rss0) / (r["n"] - n0)
        last[r["way"]] = (r["n"], r["rss_mib"])
        print(
            f"| {WAYS[r['way']]} | {r['n']} "
            f"| {r['watches']} | {r['connections']} | {r['idle_rps']:.2f} | {r['rss_mib']:.0f} "
            f"| {r['mib_per_task']:.2f} | {r['cpu_pct']:.1f} "
            f"| {r['fired_p50']:.1f} / {r['fired_p99']:.1f} | {r['success_p50']:.1f} / {r['success_p99']:.1f} "
            f"| {r['errors_5xx']} |"
        )
    print("anchors: KPO polls each pod every 2 s (N/2 req/s); goals for N=1000 training tasks: <= 4 watches per "
          "namespace, < 1 req/s idle, RSS < 300 MiB, success p99 < 5 s with 100 finishing at once")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small N, about 3 minutes")
    parser.add_argument("--only", default="", help=f"comma-separated sections of {SECTIONS}")
    parser.add_argument("--n", default="100,500,1000", help="deferred TrainingJobOperator tasks per measurement")
    parser.add_argument("--kpo-n", default="100,500,1000", help="deferred KubernetesPodOperator tasks")
    parser.add_argument(
        "--resume-n", default="", help="deferred TrainingJobOperator tasks with end_from_trigger=False (resumed)"
    )
    parser.add_argument("--finish", type=float, default=0.1, help="fraction of N whose jobs finish at once")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of the idle window")
    parser.add_argument("--jobs", type=int, default=1000, help="two-replica jobs in the burst")
    parser.add_argument("--rates", default="5,10,20,40,80", help="pods/s of the podstartup section's steps")
    parser.add_argument("--rate-seconds", type=float, default=30.0, help="seconds of each podstartup step")
    parser.add_argument("--objects", type=int, default=50_000, help="objects in the store section")
    parser.add_argument("--replicas", type=int, default=64, help="replicas of the cockpit's job")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    args.n = [int(x) for x in args.n.split(",") if x]
    args.kpo_n = [int(x) for x in args.kpo_n.split(",") if x]
    args.rates = [float(x) for x in args.rates.split(",") if x]
    args.resume_n = [int(x) for x in args.resume_n.split(",") if x]
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    only = [s for s in args.only.split(",") if s] or [s for s in SECTIONS if not (args.quick and s == "cockpit")]
    if unknown := set(only) - set(SECTIONS):
        parser.error(f"--only: unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    from benchmarks._apiserver_common import exit_on_sigterm

    exit_on_sigterm()
    before = node_processes_on_machine()
    started = time.monotonic()
    results: dict[str, Any] = {"load_before": os.getloadavg()[0], "cores": os.cpu_count()}
    try:
        for section in only:
            print(f"\n# {section}", flush=True)
            if section == "deferred":
                run_deferred(args, results)
            elif section == "burst":
                from benchmarks._scale_burst import run_burst

                results["burst"] = run_burst(args.jobs, churn=True)
            elif section == "podstartup":
                from benchmarks._scale_podstartup import run_podstartup

                results["podstartup"] = run_podstartup(args.rates, args.rate_seconds)
            elif section == "store":
                from benchmarks._scale_store import run_store

                results["store"] = run_store(args.objects)
            elif section == "cockpit":
                results["cockpit"] = run_cockpit(args.replicas, quick=args.quick)
    finally:
        after = node_processes_on_machine()
        results["node_processes_left"] = after - before
        results["seconds"] = time.monotonic() - started
        print(f"\nnode processes (entry.py) on the machine, anyone's: {before} before, {after} after the run "
              f"({time.monotonic() - started:.0f} s)")  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps(results, indent=2, default=str))


def run_cockpit(replicas: int, quick: bool) -> dict[str, Any]:
    """``benchmarks/cockpit.py`` with a ``replicas``-replica job: its own deployment and browser."""
    argv = [sys.executable, str(ROOT / "benchmarks" / "cockpit.py"), "--replicas", str(replicas)]
    argv += ["--idle", "10", "--lines", "20", "--paints", "1" if quick else "3"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1200)
    print(done.stdout)
    if done.returncode:
        print(f"cockpit.py exited {done.returncode}: {done.stderr[-2000:]}")
    return {"replicas": replicas, "exit": done.returncode, "output": done.stdout}


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
