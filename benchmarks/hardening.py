"""Hardening, measured: the fuzz tier's longer run, and what broken pods cost the valid ones.

    PYTHONPATH=src:. python benchmarks/hardening.py [--cases 2000] [--pods 15] [--quick] [--only fuzz|pods|lag]

1. Fuzz: ``--cases`` generated requests (``tests/fuzz/cases.py``) at every route of a private
   daemon; prints the case count, throughput (cases/s), the status codes seen and any 5xx or dropped
   connection, then checks every list still decodes with the ``kubernetes`` client and kubectl.
2. A valid pod's wait: create -> Running and create -> Succeeded of a one-container pod, median of
   ``--pods`` runs, on a daemon beside 50 pods that cannot start (missing ConfigMap / Secret / key,
   a hostPath Directory that does not exist, an unsupported volume type; the node agent keeps
   retrying them on its back-off) against a second daemon without them, measured alternately so
   both see the same load. Prints the ratio (goal: 1.00 +/- 0.20).
3. One heavy request (issue 25): the daemon's event-loop lag while a 1,000-node TrainJob is
   created (until its 1,000 pods exist; they stay Pending, asking for a GPU this daemon does not
   have) and deleted (until they are gone), and while a ConfigMap of 150,000 keys is created.
   Lag is measured inside the daemon (``AIRFLOW_TRAINING_LAG_PROBE``: a task that sleeps 10 ms
   and records how late it woke, what every client and controller waits on) and, beside it, as a
   second client's ``GET /api/v1/namespaces`` latency, which also works on a daemon without the
   probe (an older checkout: ``PYTHONPATH=/path/to/old/src``). Prints p50/p99/max per phase
   (goal: lag p99 < 50 ms).
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from airflow_provider_training.embedded import ControlPlane, start, stop

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.fixtures.control_plane import FAST_SETTINGS  # noqa: E402
from tests.fuzz.test_api_fuzz import lists_decode, run_fuzz  # noqa: E402
from tests.paging import count  # noqa: E402

N_BROKEN = 50


def _client(plane: ControlPlane, read: float = 5) -> httpx.Client:
    return httpx.Client(
        base_url=plane.api_url,
        verify=str(plane.ca),
        headers={"Authorization": f"Bearer {plane.token}"},
        timeout=httpx.Timeout(30, read=read),
    )


def fuzz(cases: int) -> None:
    from kubernetes import client, config

    home = Path(tempfile.mkdtemp(prefix="hardening-fuzz-")) / "home"
    plane = start(home, env=FAST_SETTINGS)
    try:
        with _client(plane) as http:
            http.post("/api/v1/namespaces", json={"metadata": {"name": "fuzz"}})
            started = time.monotonic()
            codes, problems = run_fuzz(http, "fuzz", cases, seed=int(time.time()))
            took = time.monotonic() - started
            alive = http.get("/healthz").text == "ok"
        total = sum(codes.values())
        print(f"fuzz: {total} cases in {took:.1f} s = {total / took:.0f} cases/s; daemon serving after: {alive}")
        print("  status codes: " + ", ".join(f"{code}: {n}" for code, n in sorted(codes.items())))
        print(f"  5xx or dropped connections: {len(problems)}")
        for problem in problems[:10]:
            print("   ", problem[:300])
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
        with client.ApiClient(configuration) as api:
            lists_decode(plane, api, "fuzz")
        print("  every list of the namespace decodes with the kubernetes client and kubectl")
    finally:
        stop(home, replicas=True)


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "python:3.11", "command": [sys.executable, "-c", "pass"]}
    container.update(spec.pop("container", {}))
    return {"metadata": {"name": name}, "spec": {"restartPolicy": "Never", "containers": [container], **spec}}


def broken(i: int) -> dict[str, Any]:
    kind = i % 5
    if kind == 0:
        return _pod(f"broken-{i}", container={"envFrom": [{"configMapRef": {"name": f"missing-{i}"}}]})
    if kind == 1:
        ref = {"secretKeyRef": {"name": f"missing-{i}", "key": "k"}}
        return _pod(f"broken-{i}", container={"env": [{"name": "S", "valueFrom": ref}]})
    if kind == 2:
        ref = {"configMapKeyRef": {"name": "present", "key": "absent"}}
        return _pod(f"broken-{i}", container={"env": [{"name": "S", "valueFrom": ref}]})
    if kind == 3:
        volume = {"name": "v", "hostPath": {"path": f"/nonexistent/broken-{i}", "type": "Directory"}}
        return _pod(f"broken-{i}", volumes=[volume])
    return _pod(f"broken-{i}", volumes=[{"name": "v", "nfs": {"server": "nfs.example", "path": "/x"}}])


def _wait(http: httpx.Client, url: str, phases: tuple[str, ...], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (http.get(url).json().get("status") or {}).get("phase") in phases:
            return
        time.sleep(0.005)
    raise TimeoutError(url)


def valid_pod_wait(http: httpx.Client, name: str) -> tuple[float, float]:
    """Seconds from create to Running and to Succeeded of one valid pod (deleted afterwards)."""
    pods = "/api/v1/namespaces/default/pods"
    started = time.monotonic()
    http.post(pods, json=_pod(name, container={"command": [sys.executable, "-c", "import time; time.sleep(0.3)"]}))
    _wait(http, f"{pods}/{name}", ("Running", "Succeeded"))
    running = time.monotonic() - started
    _wait(http, f"{pods}/{name}", ("Succeeded",))
    done = time.monotonic() - started
    http.delete(f"{pods}/{name}")
    return running, done


def broken_pods(runs: int) -> None:
    """Two daemons side by side, one with 50 broken pods; measurements alternate between them, so
    both see the same load on the machine."""
    homes = [Path(tempfile.mkdtemp(prefix=f"hardening-{kind}-")) / "home" for kind in ("alone", "busy")]
    planes = [start(home, env=FAST_SETTINGS) for home in homes]
    try:
        alone, busy = (_client(plane) for plane in planes)
        with alone, busy:
            for http in (alone, busy):
                http.post(
                    "/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "present"}, "data": {"a": "1"}}
                )
                valid_pod_wait(http, "warm")
            for i in range(N_BROKEN):
                assert busy.post("/api/v1/namespaces/default/pods", json=broken(i)).status_code == 201
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # every broken pod has been tried (and is on its back-off)
                items = busy.get("/api/v1/namespaces/default/pods").json()["items"]
                if sum(bool(p["status"].get("containerStatuses")) for p in items) == N_BROKEN:
                    break
                time.sleep(0.1)
            times: dict[str, list[tuple[float, float]]] = {"alone": [], "busy": []}
            for i in range(runs):
                times["alone"].append(valid_pod_wait(alone, f"valid-{i}"))
                times["busy"].append(valid_pod_wait(busy, f"valid-{i}"))
        base_running, base_done = (statistics.median(t[k] for t in times["alone"]) for k in (0, 1))
        busy_running, busy_done = (statistics.median(t[k] for t in times["busy"]) for k in (0, 1))
        print(f"valid pod beside {N_BROKEN} broken pods vs a daemon without them (median of {runs}, alternating):")
        print(
            f"  create -> Running:   {busy_running * 1000:7.1f} ms vs {base_running * 1000:7.1f} ms; "
            f"ratio {busy_running / base_running:.2f}"
        )
        print(
            f"  create -> Succeeded: {busy_done * 1000:7.1f} ms vs {base_done * 1000:7.1f} ms; "
            f"ratio {busy_done / base_done:.2f}"
        )
        log = (homes[1] / "daemon.log").read_text(errors="replace")
        print(f"  daemon log with the broken pods: {len(log.splitlines())} lines, {log.count('Traceback')} tracebacks")
    finally:
        for home in homes:
            stop(home, replicas=True)


TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
PODS = "/api/v1/namespaces/default/pods"


def _trainjob(name: str, nodes: int) -> dict[str, Any]:
    trainer = {
        "numNodes": nodes,
        "command": [sys.executable, "-c", "pass"],
        "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}},  # Pending on this GPU-less daemon: no processes
    }
    spec = {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name}, "spec": spec}


def _until(check: Callable[[], bool], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("the phase did not finish")
        time.sleep(0.25)


@contextmanager
def _latency(plane: ControlPlane, into: list[float]) -> Iterator[None]:
    """A second client's ``GET /api/v1/namespaces`` every 10 ms while the block runs."""
    done = threading.Event()

    def probe() -> None:
        with _client(plane, read=600) as http:  # (a stall of minutes is a sample too)
            while not done.is_set():
                started = time.perf_counter()
                http.get("/api/v1/namespaces")
                into.append(time.perf_counter() - started)
                time.sleep(0.01)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _pct(samples: list[float]) -> str:
    if not samples:
        return "no samples"
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered):6.1f}  p99 {p99:7.1f}  max {ordered[-1]:7.1f} ms (n={len(ordered)})"


def _lag(probe: Path, start: float, end: float) -> list[float]:
    """The daemon's lag samples (ms) taken between ``start`` and ``end`` (monotonic seconds)."""
    samples = []
    if probe.exists():
        for line in probe.read_text().splitlines():
            at, lag = line.split()
            if start <= float(at) <= end:
                samples.append(float(lag))
    return samples


def heavy_requests() -> None:
    home = Path(tempfile.mkdtemp(prefix="hardening-lag-")) / "home"
    probe = home.parent / "lag.txt"
    env = {**FAST_SETTINGS, "AIRFLOW_TRAINING_GPUS": "none", "AIRFLOW_TRAINING_LAG_PROBE": str(probe)}
    plane = start(home, env=env)
    phases: list[tuple[str, float, float, list[float]]] = []

    def phase(name: str, work: Callable[[], None]) -> None:
        latencies: list[float] = []
        started = time.monotonic()
        with _latency(plane, latencies):
            work()
        ended = time.monotonic()
        phases.append((name, started, ended, [s * 1000 for s in latencies]))

    try:
        # (a DELETE answers once the job's 1,000 pods are deleted too: seconds on a busy machine)
        with _client(plane, read=120) as http:
            http.get("/api/v1/namespaces")
            time.sleep(1)  # the probe's first samples, and the daemon settled
            idle_from = time.monotonic()
            with _latency(plane, idle := []):
                time.sleep(3)
            phases.append(("idle daemon", idle_from, time.monotonic(), [s * 1000 for s in idle]))

            def create_trainjob() -> None:
                assert http.post(TRAINJOBS, json=_trainjob("big", 1000)).status_code == 201
                _until(lambda: count(http, PODS) >= 1000)

            def delete_trainjob() -> None:
                assert http.delete(f"{TRAINJOBS}/big").status_code == 200
                _until(lambda: count(http, PODS) == 0)

            def create_configmap() -> None:
                body = {"metadata": {"name": "big"}, "data": {f"k{i}": "" for i in range(150_000)}}
                assert http.post("/api/v1/namespaces/default/configmaps", json=body).status_code == 201

            phase("1,000-node TrainJob: create until its pods exist", create_trainjob)
            phase("1,000-node TrainJob: delete until its pods are gone", delete_trainjob)
            phase("ConfigMap of 150,000 keys: create", create_configmap)
            time.sleep(1)  # the probe's last samples written
        print("event-loop lag inside the daemon (goal p99 < 50 ms) | a second client's GET /api/v1/namespaces")
        for name, started, ended, latencies in phases:
            print(f"  {name} ({ended - started:.1f} s)")
            print(f"    lag:     {_pct(_lag(probe, started, ended))}")
            print(f"    latency: {_pct(latencies)}")
        if not probe.exists():
            print("  (no lag samples: this daemon has no AIRFLOW_TRAINING_LAG_PROBE)")
    finally:
        stop(home, replicas=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="300 fuzz cases, 5 pods per measurement")
    parser.add_argument("--only", choices=("fuzz", "pods", "lag"), help="run one of the three parts")
    args = parser.parse_args()
    if args.quick:
        args.cases, args.pods = 300, 5
    if args.only in (None, "fuzz"):
        fuzz(args.cases)
    if args.only in (None, "pods"):
        broken_pods(args.pods)
    if args.only in (None, "lag"):
        heavy_requests()


if __name__ == "__main__":
    main()
