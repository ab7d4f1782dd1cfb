"""The training cockpit in a real Airflow deployment, measured through Debian's chromium:

1. first meaningful paint of the "Training job" tab for a 16-replica job (navigation start → all
   16 replica rows drawn), side by side with Airflow's own task-instance "Details" tab (navigation
   start → its operator name drawn) as the baseline; goal < 1 s;
2. requests the API server makes to the cluster per open tab per idle minute (the job runs, nothing
   changes), against a tab that would poll job, pods and events every 5 s; goal ≤ 3;
3. log line → page latency: worker 0 prints ``TICK <time>`` lines every 100 ms while the tab follows
   its log; p50 / p95 of (shown in the page minus printed); goal p95 < 500 ms.

Requests are counted where every call of ``kubernetes_asyncio`` leaves (``ApiClient.call_api``),
inside the api-server process, by a ``sitecustomize`` on its ``PYTHONPATH`` (nothing else in the
deployment uses ``kubernetes_asyncio`` here: the DAG's training task is synchronous).

    PYTHONPATH=src:. .venv/bin/python benchmarks/cockpit.py [--replicas 16] [--idle 60] [--lines 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

DAG_ID = "cockpit_training"
COUNTER = """
import os
_path = os.environ.get("COCKPIT_BENCH_REQUESTS")
if _path:
    try:
        from kubernetes_asyncio.client import api_client as _api_client
    except Exception:
        _api_client = None
    if _api_client is not None:
        _original = _api_client.ApiClient.call_api

        def _counted(self, resource_path, method, *args, **kwargs):
            with open(_path, "a") as handle:
                handle.write(f"{os.getpid()} {method} {resource_path}\\n")
            return _original(self, resource_path, method, *args, **kwargs)

        _api_client.ApiClient.call_api = _counted
"""


def wait_for(what: str, check: Any, timeout: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError(what)


def start(root: Path) -> tuple[Any, Any, Any, Path]:
    from tests.fixtures.airflow_deployment import start_deployment
    from tests.fixtures.registry import RunningRegistry

    from airflow_provider_training import embedded

    plane = embedded.start(root / "plane")
    (root / "registry").mkdir()
    registry = RunningRegistry(root / "registry", auth="none")
    registry.start()
    hook = root / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(COUNTER)
    requests = root / "requests.log"
    extra_env = {
        "PYTHONPATH": f"{hook}:{os.environ.get('PYTHONPATH', '')}",
        "COCKPIT_BENCH_REQUESTS": str(requests),
    }
    deployment = start_deployment(root / "airflow", plane, registry, extra_env)
    return plane, registry, deployment, requests


def counted(requests: Path, pid: int) -> int:
    if not requests.exists():
        return 0
    return sum(1 for line in requests.read_text().splitlines() if line.split(" ", 1)[0] == str(pid))


def api_server_pids(deployment: Any) -> set[int]:
    import psutil

    root = psutil.Process(deployment.pids["api-server"])
    return {root.pid, *(p.pid for p in root.children(recursive=True))}


def requests_of(requests: Path, pids: set[int]) -> int:
    return sum(counted(requests, pid) for pid in pids)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicas", type=int, default=16)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds the open tab is watched idle")
    parser.add_argument("--lines", type=int, default=50, help="TICK lines for the latency measurement")
    parser.add_argument("--paints", type=int, default=3, help="page loads per first-paint measurement")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    from tests.ui.browser import ARGS, CHROMIUM

    from airflow_provider_training import embedded

    root = Path(tempfile.mkdtemp(prefix="cockpit-bench-"))
    plane, registry, deployment, requests = start(root)
    try:
        deployment.wait_for_dags(DAG_ID)
        deployment.unpause(DAG_ID)
        go = root / "go"
        run = deployment.trigger(
            DAG_ID, {"go_file": str(go), "workers": args.replicas - 1, "ticks": args.lines, "epochs": 3}
        )
        job_url = f"{deployment.base_url}/training/api/dags/{DAG_ID}/runs/{quote(run, safe='')}/tasks/train/job"

        def all_running() -> Any:
            response = httpx.get(job_url, headers={"Authorization": f"Bearer {deployment.token()}"}, timeout=60)
            if response.status_code != 200:
                return None
            body = response.json()
            replicas = body["replicas"]
            return len(replicas) == args.replicas and all(r["phase"] == "Running" for r in replicas) and body

        job = wait_for(f"{args.replicas} replicas running", all_running, timeout=300)["job"]["name"]
        ti = f"{deployment.base_url}/dags/{DAG_ID}/runs/{quote(run, safe='')}/tasks/train"
        with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="cockpit-bench-chromium-") as profile:
            context = pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=ARGS, viewport={"width": 1400, "height": 1000}
            )
            context.add_cookies([{"name": "_token", "value": deployment.token(), "url": deployment.base_url}])

            own: list[float] = []

            def paint(url: str, ready: str) -> float:
                page = context.new_page()
                page.goto(url)
                page.wait_for_function(ready, timeout=60_000)
                ms = float(page.evaluate("performance.now()"))
                # the tab's own part: from the moment Airflow's UI asks for the cockpit's bundle
                bundle = page.evaluate(
                    "performance.getEntriesByType('resource').find((e) => e.name.includes('cockpit.js'))?.startTime"
                )
                if bundle is not None:
                    own.append(ms - float(bundle))
                page.close()
                return ms

            rows = f"document.querySelectorAll('[data-testid=\"replicas\"] tbody tr').length === {args.replicas}"
            details = "document.body.innerText.includes('PyTorchJobOperator')"
            paint(f"{ti}/plugin/training-job", rows)  # warm the browser cache once, as a returning user
            cockpit_ms = [paint(f"{ti}/plugin/training-job", rows) for _ in range(args.paints)]
            cockpit_own = own[-args.paints :]
            airflow_ms = [paint(f"{ti}/details", details) for _ in range(args.paints)]

            # idle: the tab stays open on the running job (it follows the master's log)
            page = context.new_page()
            page.goto(f"{ti}/plugin/training-job")
            page.wait_for_function(rows, timeout=60_000)
            time.sleep(5)  # the streams are open
            pids = api_server_pids(deployment)
            before = requests_of(requests, pids)
            time.sleep(args.idle)
            idle = requests_of(requests, api_server_pids(deployment)) - before
            per_minute = idle / (args.idle / 60.0)

            # latency: follow worker 0's log, then let it print timestamped lines
            worker = f"{job}-worker-0"
            page.click(f'[data-testid="show-log-{worker}"]')
            page.wait_for_function(
                f"document.querySelector('[data-testid=\"log-{worker}\"]')?.textContent.includes('epoch 3')",
                timeout=60_000,
            )
            page.evaluate(
                """(pane) => {
                  window.__ticks = new Map();
                  new MutationObserver((records) => {
                    const now = Date.now();
                    for (const record of records) for (const node of record.addedNodes) {
                      const text = node.textContent || "";
                      if (!node.closest || !node.closest(`[data-testid="${pane}"]`)) continue;
                      for (const line of text.split("\\n")) {
                        const m = /^TICK (\\d+\\.\\d+)/.exec(line.trim());
                        if (m && !window.__ticks.has(m[1])) window.__ticks.set(m[1], now - parseFloat(m[1]) * 1000);
                      }
                    }
                  }).observe(document.body, { childList: true, subtree: true });
                }""",
                f"log-{worker}",
            )
            go.write_text("go")
            page.wait_for_function(f"window.__ticks.size >= {args.lines}", timeout=120_000)
            latencies = sorted(page.evaluate("Array.from(window.__ticks.values())"))
            page.close()
            context.close()
        p95 = latencies[max(0, round(0.95 * len(latencies)) - 1)]
        polling = 3 * 60 / 5  # job + pods + events, every 5 s
        print(f"first meaningful paint, {args.replicas}-replica job (navigation start → all replica rows), ms:")
        print(
            f"  cockpit 'Training job' tab  median {statistics.median(cockpit_ms):7.0f}  runs {[round(x) for x in cockpit_ms]}"
        )
        print(
            f"  Airflow 'Details' tab       median {statistics.median(airflow_ms):7.0f}  runs {[round(x) for x in airflow_ms]}"
        )
        print(
            f"  of which the cockpit (bundle requested → rows drawn) median {statistics.median(cockpit_own):7.0f}  "
            f"runs {[round(x) for x in cockpit_own]}  (goal < 1000)"
        )
        print(
            f"  ratio cockpit / Airflow's own tab: {statistics.median(cockpit_ms) / statistics.median(airflow_ms):.2f}"
        )
        print(f"cluster requests per open tab per idle minute: {per_minute:.2f} ({idle} in {args.idle:.0f} s)")
        print(
            f"  a tab polling job + pods + events every 5 s: {polling:.0f}  ratio {per_minute / polling:.3f}  (goal <= 3)"
        )
        print(
            f"log line → page latency over {len(latencies)} lines, ms: p50 {statistics.median(latencies):.0f}  p95 {p95:.0f}  max {latencies[-1]:.0f}  (goal p95 < 500)"
        )
    finally:
        deployment.stop()
        registry.stop()
        embedded.stop(plane.home, replicas=True)


if __name__ == "__main__":
    main()
