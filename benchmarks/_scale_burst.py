"""``scale.py``'s burst section: N two-replica PyTorchJobs of ``true`` created at once on a private
daemon, and while they run, 8 clients that churn 20 objects/s and time every call.

- the burst: create → all ``Succeeded`` and jobs/s, beside the machine's raw spawn rate (``true``
  started and reaped, one at a time, in the same run: a job needs two); pod startup latency — from
  the pod's ``ADDED`` to its first state past ``Pending`` (``Running``, or ``Succeeded`` for a
  container that is done before anyone looks), both seen on one watch, as Kubernetes' density test
  measures it — against the 5 s SLO; the daemon's peak RSS; 5xx (``/metrics``, and as the clients
  saw them); node processes left after ``embedded stop --all`` (must be 0).
- the churn: 8 clients, each every 0.4 s one mutating call (create, update, delete of a ConfigMap,
  patch of a running job's labels) and one read (get / list of ConfigMaps, get of a job, list of a
  job's pods by label selector): 20 mutations/s in all, Kubernetes' steady-state churn SLO.
  p50/p99 per call class against the 1 s SLO (goal 100 ms).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import statistics
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from benchmarks._apiserver_common import cleanup, node_processes, stop_all
from tests.paging import listed

NAMESPACE = "burst"
JOBS = f"/apis/kubeflow.org/v1/namespaces/{NAMESPACE}/pytorchjobs"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
CHURN_CLIENTS = 8
CHURN_PERIOD = CHURN_CLIENTS / 20  # s between one client's mutations: 20 mutations/s in all


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] if ordered else float("nan")


def spawn_rate(count: int = 300) -> float:
    """``true`` processes started and reaped per second, one after another."""
    started = time.perf_counter()
    for _ in range(count):
        subprocess.run(["true"], check=True)
    return count / (time.perf_counter() - started)


def job(name: str) -> dict[str, Any]:
    def spec() -> dict[str, Any]:
        container = {"name": "pytorch", "image": "python:3.11", "command": ["true"]}
        return {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "labels": {"scale-benchmark": "burst"}},
        "spec": {"pytorchReplicaSpecs": {"Master": spec(), "Worker": spec()}},
    }


def _http(plane: Any, read: float = 60) -> httpx.Client:
    return httpx.Client(
        base_url=plane.api_url,
        verify=str(plane.ca),
        headers={"Authorization": f"Bearer {plane.token}"},
        timeout=httpx.Timeout(60, read=read),
    )


class PodWatch:
    """Every pod of the namespace, from one watch: when it was ADDED and when it first left Pending."""

    def __init__(self, plane: Any, path: str = PODS) -> None:
        self.path = path
        self.added: dict[str, float] = {}
        self.started: dict[str, float] = {}
        self._stop = threading.Event()
        self._plane = plane
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        version = ""
        with _http(self._plane, read=30) as http:
            while not self._stop.is_set():
                params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "600"}
                if version:
                    params["resourceVersion"] = version
                with contextlib.suppress(httpx.HTTPError), http.stream("GET", self.path, params=params) as response:
                    for line in response.iter_lines():
                        now = time.monotonic()
                        event = json.loads(line)
                        pod = event["object"]
                        version = pod.get("metadata", {}).get("resourceVersion", version)
                        name = pod.get("metadata", {}).get("name")
                        if event["type"] in ("BOOKMARK", "ERROR") or not name:
                            if event["type"] == "ERROR":
                                version = ""  # 410: from now
                            continue
                        self.added.setdefault(name, now)
                        if (pod.get("status") or {}).get("phase") not in (None, "Pending"):
                            self.started.setdefault(name, now)
                        if self._stop.is_set():
                            return

    def rate(self) -> float:
        """Pods started per second, from the first pod's ADDED to the last pod's start (the node's
        throughput, to the watch's resolution rather than the 2 s of the all-Succeeded poll)."""
        if not self.started or not self.added:
            return float("nan")
        span = max(self.started.values()) - min(self.added.values())
        return len(self.started) / span if span > 0 else float("nan")

    def latencies(self) -> list[float]:
        return [self.started[n] - self.added[n] for n in self.started if n in self.added]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)  # a daemon thread: it ends with its connection at the latest


CALLS = (
    "create",
    "update",
    "delete",
    "patch job",
    "get configmap",
    "list configmaps (selector)",
    "get job",
    "list a job's pods (selector)",
)


class Churn:
    """8 clients: each every ``CHURN_PERIOD`` s one mutating call and one read, each call timed."""

    def __init__(self, plane: Any, jobs: list[str]) -> None:
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[int, int] = defaultdict(int)
        self._stop = threading.Event()
        self._jobs = jobs
        self._threads = [
            threading.Thread(target=self._client, args=(plane, k), daemon=True) for k in range(CHURN_CLIENTS)
        ]
        for thread in self._threads:
            thread.start()

    def _call(self, http: httpx.Client, label: str, method: str, url: str, **kw: Any) -> httpx.Response:
        started = time.perf_counter()
        response = http.request(method, url, **kw)
        self.samples[label].append(time.perf_counter() - started)
        if response.status_code >= 500:
            self.errors[response.status_code] += 1
        return response

    def _client(self, plane: Any, k: int) -> None:
        cms = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
        merge = {"Content-Type": "application/merge-patch+json"}
        with _http(plane) as http:
            alive: list[str] = []
            for i in itertools.count():
                if self._stop.is_set():
                    return
                tick = time.monotonic()
                step = i % 4
                name = f"churn-{k}-{i}"
                meta = {"labels": {"churn": str(k)}}
                if step in (0, 1) or not alive:
                    body = {"metadata": {"name": name, **meta}, "data": {"i": str(i)}}
                    if self._call(http, "create", "POST", cms, json=body).status_code == 201:
                        alive.append(name)
                elif step == 2:
                    body = {"metadata": {"name": alive[-1], **meta}, "data": {"i": f"u{i}"}}
                    self._call(http, "update", "PUT", f"{cms}/{alive[-1]}", json=body)
                else:
                    self._call(http, "delete", "DELETE", f"{cms}/{alive.pop(0)}")
                job = self._jobs[(k * 7 + i) % len(self._jobs)]
                if step == 1:
                    patch = {"metadata": {"labels": {"churn-tick": str(i)}}}
                    self._call(http, "patch job", "PATCH", f"{JOBS}/{job}", json=patch, headers=merge)
                reads: list[tuple[str, str, dict[str, Any]]] = [
                    ("get configmap", f"{cms}/{alive[-1] if alive else name}", {}),
                    ("list configmaps (selector)", cms, {"labelSelector": f"churn={k}"}),
                    ("get job", f"{JOBS}/{job}", {}),
                    ("list a job's pods (selector)", PODS, {"labelSelector": f"training.kubeflow.org/job-name={job}"}),
                ]
                label, url, params = reads[i % len(reads)]
                self._call(http, label, "GET", url, params=params)
                self._stop.wait(max(0.0, CHURN_PERIOD - (time.monotonic() - tick)))

    def until_every_call(self, timeout: float) -> None:
        """Keep churning until every call class was timed at least once (a short burst, as the
        test's, can end before each client went through its four steps), at most ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not set(CALLS) <= set(self.samples) and time.monotonic() < deadline:
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


def _succeeded(http: httpx.Client) -> int:
    def done(item: dict[str, Any]) -> bool:
        conditions = (item.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Succeeded" and c["status"] == "True" for c in conditions)

    return sum(done(item) for item in listed(http, JOBS))


def run_burst(n: int, churn: bool = True) -> dict[str, Any]:
    import psutil
    from benchmarks._scale_deferred import server_errors
    from tests.fixtures.control_plane import FAST_SETTINGS

    from airflow_provider_training.embedded import start

    spawns = spawn_rate()
    home = Path(tempfile.mkdtemp(prefix="scale-burst-"))  # cleanup() removes it
    plane = start(home, env=FAST_SETTINGS)
    result: dict[str, Any] = {"jobs": n, "spawns_per_s": spawns}
    peak = {"rss": 0, "processes": 0}
    sampling = threading.Event()

    def sample() -> None:
        daemon = psutil.Process(plane.pid)
        while not sampling.is_set():
            with contextlib.suppress(psutil.Error):
                peak["rss"] = max(peak["rss"], daemon.memory_info().rss)
                peak["processes"] = max(peak["processes"], len(node_processes(home)))
            sampling.wait(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    churner: Churn | None = None
    watch: PodWatch | None = None
    try:
        with _http(plane) as http:
            http.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}}).raise_for_status()
            errors0 = server_errors(plane)
            idle_rss = psutil.Process(plane.pid).memory_info().rss
            cpu0 = sum(psutil.Process(plane.pid).cpu_times()[:2])
            names = [f"burst-{i}" for i in range(n)]
            watch = PodWatch(plane)
            sampler.start()
            time.sleep(1.0)  # the watch is open
            codes: dict[int, int] = defaultdict(int)

            # 4 clients, each on one connection (a client per job made a TLS handshake per job:
            # a quarter of the machine went to the benchmark's own connections)
            local = threading.local()
            clients: list[httpx.Client] = []

            def create(name: str) -> None:
                own = getattr(local, "client", None)
                if own is None:
                    own = local.client = _http(plane)
                    clients.append(own)
                for _ in range(20):
                    code = own.post(JOBS, json=job(name)).status_code
                    codes[code] += 1
                    if code not in (429, 503):
                        return
                    time.sleep(0.5)

            started = time.monotonic()
            first = names[: max(1, min(n, 2 * CHURN_CLIENTS))]
            for name in first:  # the jobs the churn patches exist before it starts
                create(name)
            if churn:
                churner = Churn(plane, first)
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(create, names[len(first) :]))
            for own in clients:
                own.close()
            created = time.monotonic() - started
            deadline = time.monotonic() + 120 + 2 * n
            while (done := _succeeded(http)) < n and time.monotonic() < deadline:
                time.sleep(2.0)
            took = time.monotonic() - started
            with contextlib.suppress(psutil.Error):
                cpu = psutil.Process(plane.pid).cpu_times()
                result["daemon_cpu_s"] = cpu.user + cpu.system - cpu0
            if churner is not None:
                churner.until_every_call(60)
                churner.stop()
            watch.stop()
            sampling.set()
            startup = watch.latencies()
            result.update(
                {
                    "created_s": created,
                    "succeeded": done,
                    "all_succeeded_s": took,
                    "jobs_per_s": done / took,
                    "create_codes": dict(codes),
                    "pods_seen": len(watch.added),
                    "pods_per_s": watch.rate(),
                    "pod_startup_p50": statistics.median(startup) if startup else float("nan"),
                    "pod_startup_p99": percentile(startup, 99),
                    "daemon_rss_idle_mib": idle_rss / 2**20,
                    "daemon_rss_peak_mib": peak["rss"] / 2**20,
                    "node_processes_peak": peak["processes"],
                    "errors_5xx": server_errors(plane) - errors0,
                }
            )
            if churner is not None:
                result["churn"] = {
                    label: {"n": len(s), "p50": statistics.median(s), "p99": percentile(s, 99), "max": max(s)}
                    for label, s in sorted(churner.samples.items())
                }
                result["churn_5xx"] = dict(churner.errors)
    finally:
        sampling.set()
        if churner is not None:
            churner.stop()
        if watch is not None:
            watch.stop()
        result["leaked_processes"] = len(stop_all(home))
        cleanup(home)  # kills (and reports) any left, removes the directory
    print_burst(result)
    return result


def print_burst(r: dict[str, Any]) -> None:
    if "succeeded" not in r:
        return
    print(f"\n## burst of {r['jobs']} two-replica jobs of `true`")
    print("| figure | value | anchor |")
    print("|---|---|---|")
    print(f"| created (all POSTs answered) | {r['created_s']:.1f} s | |")
    print(f"| create → all Succeeded | {r['all_succeeded_s']:.1f} s ({r['succeeded']}/{r['jobs']}) | |")
    print(f"| pods started per second (first ADDED → last start) | {r['pods_per_s']:.1f} | |")
    print(f"| jobs/s | {r['jobs_per_s']:.1f} | raw spawn of `true`: {r['spawns_per_s']:.0f}/s = "
          f"{r['spawns_per_s'] / 2:.0f} two-process jobs/s |")  # fmt: skip
    print(f"| pod startup p50 / p99 ({r['pods_seen']} pods) | {r['pod_startup_p50']:.2f} / "
          f"{r['pod_startup_p99']:.2f} s | SLO p99 ≤ 5 s |")  # fmt: skip
    if "daemon_cpu_s" in r:
        print(f"| daemon CPU per pod (API server, controllers, node agent) | "
              f"{1000 * r['daemon_cpu_s'] / max(1, r['pods_seen']):.1f} ms | |")  # fmt: skip
    print(f"| daemon RSS idle / peak | {r['daemon_rss_idle_mib']:.0f} / {r['daemon_rss_peak_mib']:.0f} MiB | |")
    print(f"| node processes at peak | {r['node_processes_peak']} | |")
    print(f"| 5xx (server) / create answers | {r['errors_5xx']} / {r['create_codes']} | 0 |")
    print(f"| node processes left after stop --all | {r['leaked_processes']} | 0 |")
    if churn := r.get("churn"):
        print(f"\n## API latency under churn ({CHURN_CLIENTS} clients, 20 mutations/s) while the burst runs")
        print("| call | n | p50 ms | p99 ms | max ms | SLO p99 1 s / goal 100 ms |")
        print("|---|---|---|---|---|---|")
        for label, s in churn.items():
            verdict = "goal met" if s["p99"] < 0.1 else ("SLO met" if s["p99"] < 1 else "SLO NOT met")
            print(f"| {label} | {s['n']} | {s['p50'] * 1000:.0f} | {s['p99'] * 1000:.0f} | "
                  f"{s['max'] * 1000:.0f} | {verdict} |")  # fmt: skip
        print(f"churn clients' 5xx: {r.get('churn_5xx') or 0}")
