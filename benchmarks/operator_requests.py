"""API requests per waiting job per minute: the operator's sync wait (watch + log follower) and the
deferrable trigger, against a naive loop that GETs the job every 5 s. All three wait on running jobs
on an embedded control plane for the same window, while nothing changes.

Requests are counted where every call of the official clients leaves (``ApiClient.call_api``).

    PYTHONPATH=src:. python benchmarks/operator_requests.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def counted(api: Any, box: list[float]) -> None:
    original = api.call_api

    def call(*args: Any, **kwargs: Any) -> Any:
        box.append(time.monotonic())
        return original(*args, **kwargs)

    api.call_api = call


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    from kubernetes import client, config
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio import config as aconfig
    from tests.factories import simple_job as job

    from airflow_provider_training.client import AsyncTrainingJobClient, LogFollower, TrainingJobClient
    from airflow_provider_training.embedded import start, stop

    home = Path(tempfile.mkdtemp(prefix="bench-requests-"))
    plane = start(home)
    try:

        def api() -> Any:
            configuration = client.Configuration()
            config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
            return client.ApiClient(configuration)

        setup = TrainingJobClient(api())
        running = "import time; print('epoch 1', flush=True); time.sleep(600)"
        for name in ("sync", "deferred", "naive"):  # real jobs: their master replicas run and log
            setup.create(job(name=name, script=running), namespace="default")
        deadline = time.monotonic() + 60
        while not all(
            [p.get("status", {}).get("phase") for p in setup.pods("PyTorchJob", n, "default")] == ["Running"]
            for n in ("sync", "deferred", "naive")
        ):
            if time.monotonic() > deadline:
                raise SystemExit("the jobs did not start")
            time.sleep(0.1)

        calls: dict[str, list[float]] = {"sync": [], "deferred": [], "naive": []}
        window = args.seconds
        t0 = time.monotonic()

        def sync_wait() -> None:  # what TrainingJobOperator does in sync mode (defaults)
            sync_api = api()
            counted(sync_api, calls["sync"])
            waiter = TrainingJobClient(sync_api)
            follower = LogFollower(waiter, "PyTorchJob", "sync", "default", sink=lambda line: None).start()
            waiter.wait("PyTorchJob", "sync", "default")
            follower.stop(drain=0)

        async def deferred_wait() -> None:  # what TrainingJobTrigger does (defaults)
            configuration = aclient.Configuration()
            await aconfig.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
            async with aclient.ApiClient(configuration) as aapi:
                original = aapi.call_api

                async def call(*a: Any, **k: Any) -> Any:
                    calls["deferred"].append(time.monotonic())
                    return await original(*a, **k)

                aapi.call_api = call  # type: ignore[method-assign]
                await AsyncTrainingJobClient(aapi).wait("PyTorchJob", "deferred", "default")

        def naive() -> None:  # a 5 s polling loop (GET the job, look at its conditions)
            naive_api = api()
            counted(naive_api, calls["naive"])
            custom = client.CustomObjectsApi(naive_api)
            while time.monotonic() - t0 < window:
                custom.get_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", "naive")
                time.sleep(5)

        # the waiters never finish on their own: count what they did during the window, then stop
        threads = [
            threading.Thread(target=sync_wait, daemon=True),
            threading.Thread(target=lambda: asyncio.run(deferred_wait()), daemon=True),
            threading.Thread(target=naive, daemon=True),
        ]
        for thread in threads:
            thread.start()
        time.sleep(window)
        calls = {key: [t for t in times if t - t0 <= window] for key, times in calls.items()}
        minutes = window / 60
        naive_rate = len(calls["naive"]) / minutes
        print(f"window: {window:.0f} s, jobs running, nothing changes")
        print(f"{'waiter':<34}{'requests':>9}{'per min':>9}{'after 5 s':>11}{'vs naive':>10}")
        for key, label in (
            ("naive", "naive poll, GET every 5 s"),
            ("sync", "operator, sync (watch + log follow)"),
            ("deferred", "trigger, deferrable (watch)"),
        ):
            n = len(calls[key])
            steady = sum(1 for t in calls[key] if t - t0 > 5)
            rate = n / minutes
            print(f"{label:<34}{n:>9}{rate:>9.2f}{steady:>11}{rate / naive_rate:>10.3f}")
        print("(steady state with the default watch_timeout of 240 s: one watch renewal per stream per 4 min)")
    finally:
        stop(home, replicas=True)


if __name__ == "__main__":
    main()
