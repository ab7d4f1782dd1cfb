"""``scale.py``'s deferred section: N deferred tasks in the one triggerer of a real deployment.

One DAG run of ``tests/deployment/dags/scale_deferred.py`` maps N tasks: deferrable
``TrainingJobOperator``s of *driven* PyTorchJobs (``runPolicy.managedBy``: the benchmark plays the
Training Operator with ``JobDriver``), or — the anchor — deferrable ``KubernetesPodOperator``s whose
pods are bound to a node no agent runs (the benchmark plays their kubelet). No replica process runs.

Once all N are deferred the fake controller pauses, and over an idle window: the triggerer's RSS (its
process tree: the triggerer and its trigger runner) against the same before the run, its CPU, its
TCP connections to the API server, and — on the API server's side (``/metrics``) — the open watches
and the requests per second. Then 10 % of the jobs (pods) finish at once: job finished → trigger
fired (the triggerer's "Trigger fired event" line in the trigger's log) and → task success (the task
instance's ``end_date``: a worker resumed the task and finished it). N grows by one more DAG run per
size (the smaller N's tasks stay deferred). At the end the runs are marked success (their other
tasks with them, their triggers cancelled), so what comes next starts from an empty triggerer.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

DAGS = {
    "training": ("scale_deferred_training", "train"),  # a succeeded job ends its task in the triggerer
    "training-resume": ("scale_deferred_training_resume", "train"),  # end_from_trigger=False: a worker resumes it
    "kpo": ("scale_deferred_kpo", "pod"),
}
FAKE_NODE = "scale-fake-kubelet"  # = scale_deferred.FAKE_NODE (a DAG file is not imported here)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] if ordered else float("nan")


# -- the processes' side --------------------------------------------------------------------------


def triggerer_tree(d: Any) -> list[Any]:
    import psutil

    root = psutil.Process(d.pids["triggerer"])
    return [root, *root.children(recursive=True)]


def tree_rss(d: Any) -> int:
    return sum(p.memory_info().rss for p in triggerer_tree(d))


def tree_cpu(d: Any) -> float:
    return sum(sum(p.cpu_times()[:2]) for p in triggerer_tree(d))


def tree_connections(d: Any, port: int) -> int:
    """Established TCP connections from the triggerer's processes to the API server's port."""
    count = 0
    for process in triggerer_tree(d):
        for conn in process.net_connections(kind="tcp"):
            if conn.raddr and conn.raddr.port == port and conn.status == "ESTABLISHED":
                count += 1
    return count


def server_errors(plane: Any) -> int:
    """5xx answers of the API server so far (``/metrics``)."""
    from tests.apimetrics import scrape

    return int(
        sum(
            s.value
            for s in scrape(plane.kubeconfig)
            if s.name == "apiserver_request_total" and s.labels.get("code", "").startswith("5")
        )
    )


# -- the fake controllers -------------------------------------------------------------------------


class FakeController:
    """Plays the Training Operator (``training``: each new driven job -> Created + Running) or the
    kubelet of ``FAKE_NODE`` (``kpo``: each new pod -> Running) while active, until ``stop``."""

    def __init__(self, api: Any, home: Any, way: str, namespace: str) -> None:
        from kubernetes import client
        from tests.fixtures.job_driver import JobDriver

        self.way, self.namespace = way, namespace
        self.driver = JobDriver(api, home)
        self.core = client.CoreV1Api(api)
        self.known: set[str] = set()
        self._stop = threading.Event()
        self._active = threading.Event()  # cleared: no requests (an idle window)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def names(self) -> list[str]:
        if self.way == "training":
            listed = self.driver.custom.list_namespaced_custom_object(
                "kubeflow.org", "v1", self.namespace, "pytorchjobs"
            )
            return [j["metadata"]["name"] for j in listed["items"]]
        return [p.metadata.name for p in self.core.list_namespaced_pod(self.namespace).items]

    def _run(self) -> None:
        with ThreadPoolExecutor(4) as pool:
            while not self._stop.is_set():
                if self._active.wait(0.5):
                    new = [n for n in self.names() if n not in self.known]
                    self.known.update(new)
                    list(pool.map(self.start, new))
                    self._stop.wait(0.5)

    def pause(self) -> None:
        """No more requests until ``resume``; returns once the current round is done."""
        self._active.clear()
        time.sleep(1.5)

    def resume(self) -> None:
        self._active.set()

    def names_of(self, tasks: list[tuple[int, int]]) -> dict[tuple[int, int], str]:
        """The job (pod) of each (stage, map index): a job's name says both, a pod its labels and args."""
        if self.way == "training":
            return {(stage, i): f"scale-s{stage}-{i}" for stage, i in tasks}
        out = {}
        for pod in self.core.list_namespaced_pod(self.namespace).items:
            task = (int(pod.metadata.labels["scale-stage"]), int(pod.spec.containers[0].args[0]))
            if task in tasks:
                out[task] = pod.metadata.name
        return out

    def start(self, name: str) -> None:
        if self.way == "training":
            self.driver.start("PyTorchJob", name, self.namespace)
        else:
            self._pod_status(name, "Running", {"running": {"startedAt": _now()}})

    def finish(self, name: str) -> None:
        if self.way == "training":
            self.driver.succeed("PyTorchJob", name, self.namespace)
        else:
            terminated = {"exitCode": 0, "reason": "Completed", "startedAt": _now(), "finishedAt": _now()}
            self._pod_status(name, "Succeeded", {"terminated": terminated})

    def _pod_status(self, name: str, phase: str, state: dict[str, Any]) -> None:
        pod = self.core.read_namespaced_pod(name, self.namespace)
        running = phase == "Running"
        pod.status = {
            "phase": phase,
            "startTime": _now(),
            "conditions": [{"type": "Ready", "status": str(running), "lastTransitionTime": _now()}],
            "containerStatuses": [
                {
                    "name": "base",
                    "image": "python:3.11",
                    "imageID": "",
                    "ready": running,
                    "started": running,
                    "restartCount": 0,
                    "state": state,
                }
            ],
        }
        self.core.replace_namespaced_pod_status(name, self.namespace, pod)

    def finish_all(self, tasks: list[tuple[int, int]]) -> dict[tuple[int, int], float]:
        """Finish the jobs (pods) of ``tasks`` at once (4 writers); when each was written."""
        names = self.names_of(tasks)
        written: dict[tuple[int, int], float] = {}

        def finish(task: tuple[int, int]) -> None:
            self.finish(names[task])
            written[task] = time.time()

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(finish, tasks))
        return written

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


# -- the measurement -----------------------------------------------------------------------------


def _tis(d: Any, dag_id: str, run_id: str, state: str | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        params: dict[str, Any] = {"limit": 100, "offset": len(out)}
        if state:
            params["state"] = state
        page = d.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances", params=params).json()
        out += page["task_instances"]
        if len(out) >= page["total_entries"] or not page["task_instances"]:
            return out


def _until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(1.0)
    return value


def _timestamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _fired_at(d: Any, dag_id: str, run_id: str, task_id: str, index: int) -> float | None:
    """When the triggerer fired the task's event: its line in the trigger's log (beside the task's)."""
    folder = d.task_logs / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}" / f"map_index={index}"
    for path in folder.glob("attempt=*.log.trigger.*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if '"Trigger fired event"' in line:
                return _timestamp(json.loads(line)["timestamp"])
    return None


def _failed_logs(d: Any, dag_id: str, run_id: str, failed: list[dict[str, Any]]) -> str:
    """The end of the first three failed mapped tasks' logs (worker's and triggerer's parts)."""
    parts = []
    for ti in failed[:3]:
        folder = d.task_logs / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={ti['task_id']}"
        folder = folder / f"map_index={ti['map_index']}"
        for path in sorted(folder.glob("attempt=*.log*")):
            parts.append(
                f"--- {ti['task_id']}[{ti['map_index']}] {path.name}\n{path.read_text(errors='replace')[-2000:]}"
            )
    return "\n".join(parts) or d.failure_details(dag_id, run_id)[-3000:]


Task = tuple[int, int]  # (stage, map index): stage s is the DAG run that named its jobs scale-s<s>-*


def deferred(
    d: Any,
    plane: Any,
    way: str,
    sizes: list[int],
    idle: float,
    say: Callable[[str], None] = print,
    finish: float = 0.1,
) -> list[dict[str, Any]]:
    """N deferred tasks of ``way`` (``training`` | ``kpo``) in ``d``'s triggerer, for each N of
    ``sizes`` (ascending): one DAG run per N adds the tasks missing to N, so the tasks of the
    smaller N stay deferred and the largest N costs its own tasks only. Per N: the figures of an
    idle window, then ``finish`` of N (10 %) finish at once (those stay finished)."""
    from kubernetes import client, config
    from tests.apimetrics import open_watches, requests, scrape

    dag_id, task_id = DAGS[way]
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
    api = client.ApiClient(configuration)
    namespace = f"scale-{way}-{int(time.time()) % 100000}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    port = int(plane.api_url.rsplit(":", 1)[1])
    d.wait_for_dags(dag_id)
    d.unpause(dag_id)
    from airflow_provider_training.client.informer import DEFAULT_LINGER

    time.sleep(DEFAULT_LINGER + 3)  # the triggerer settles: its last triggers' informers linger
    rss0, watches0, errors0 = tree_rss(d), open_watches(plane.kubeconfig), server_errors(plane)
    controller = FakeController(api, plane.home, "kpo" if way == "kpo" else "training", namespace)
    runs: list[str] = []
    waiting: set[Task] = set()
    rows: list[dict[str, Any]] = []
    started = time.monotonic()

    def deferred_now() -> set[Task]:
        return {(stage, ti["map_index"]) for stage, run in enumerate(runs) for ti in _tis(d, dag_id, run, "deferred")}

    try:
        for n in sizes:
            controller.resume()
            add = n - len(waiting)
            stage = len(runs)
            runs.append(d.trigger(dag_id, {"n": add, "namespace": namespace, "stage": stage}))

            def all_deferred(run: str = runs[-1], add: int = add) -> bool:
                if failed := _tis(d, dag_id, run, "failed") + _tis(d, dag_id, run, "upstream_failed"):
                    raise RuntimeError(f"{len(failed)} {way} tasks failed:\n{_failed_logs(d, dag_id, run, failed)}")
                return len(_tis(d, dag_id, run, "deferred")) >= add

            _until(all_deferred, 300 + 5 * add, f"{add} more {way} tasks deferred")
            waiting |= {(stage, i) for i in range(add)}
            to_defer = time.monotonic() - started
            say(f"  {n} {way} tasks deferred after {to_defer:.0f} s; idle window {idle:.0f} s")
            controller.pause()
            time.sleep(5)  # the last deferrals' triggers start, their first requests done
            watches = open_watches(plane.kubeconfig) - watches0
            watch_resources = {
                s.labels.get("resource"): int(s.value)
                for s in scrape(plane.kubeconfig)
                if s.name == "apiserver_longrunning_requests" and s.labels.get("verb") == "WATCH" and s.value
            }
            connections = tree_connections(d, port)
            rss = tree_rss(d)
            cpu0, req0, t0 = tree_cpu(d), requests(plane.kubeconfig), time.monotonic()
            time.sleep(idle)
            cpu1, req1, t1 = tree_cpu(d), requests(plane.kubeconfig), time.monotonic()

            finishing = sorted(waiting)[: max(1, round(n * finish))]
            written = controller.finish_all(finishing)

            def succeeded(finishing: list[Task] = finishing) -> dict[Task, float] | None:
                ends = {
                    (stage, ti["map_index"]): _timestamp(ti["end_date"])
                    for stage, run in enumerate(runs)
                    for ti in _tis(d, dag_id, run, "success")
                    if ti["task_id"] == task_id
                }
                return ends if all(t in ends for t in finishing) else None

            success = _until(succeeded, 300 + 5 * len(finishing), f"{len(finishing)} finished {way} tasks succeed")
            waiting -= set(finishing)
            fired = {t: at for t in finishing if (at := _fired_at(d, dag_id, runs[t[0]], task_id, t[1])) is not None}
            to_fired = [fired[t] - written[t] for t in fired]
            to_success = [success[t] - written[t] for t in finishing]
            rows.append(
                {
                    "way": way,
                    "n": n,
                    "to_defer_s": to_defer,
                    "watches": watches,
                    "watch_resources": watch_resources,
                    "connections": connections,
                    "idle_rps": (req1 - req0) / (t1 - t0),
                    "rss_mib": (rss - rss0) / 2**20,
                    "rss_total_mib": rss / 2**20,
                    "cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
                    "finishing": len(finishing),
                    "fired_p50": statistics.median(to_fired) if to_fired else float("nan"),
                    "fired_p99": percentile(to_fired, 99),
                    "success_p50": statistics.median(to_success),
                    "success_p99": percentile(to_success, 99),
                    "succeeded": len(finishing),
                    "errors_5xx": server_errors(plane) - errors0,
                }
            )
            say(f"  {rows[-1]}")
    finally:
        controller.stop()
        # the rest: done (their triggers are cancelled), so what comes next starts from an empty triggerer
        for run in runs:
            d.api("PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{run}", json={"state": "success"})
        client.CoreV1Api(api).delete_namespace(namespace)
        api.close()
    return rows
