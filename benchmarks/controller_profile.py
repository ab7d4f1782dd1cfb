"""Where the time of a 4-replica ``python -c pass`` PyTorchJob goes, from a watching client's view.

    PYTHONPATH=src python benchmarks/controller_profile.py [--runs 10]

Watches every write the control plane makes (the job, its pods, Services and Events) from one
watch per resource and prints, per step, the median time since the create request was sent:
the create's answer (admission + store), the pods' creation (job controller), each pod scheduled
(node agent: admission, podspec, supervisor spawned), running (supervisor start-up + container
spawn), terminated, and the job's Succeeded condition; plus the number of writes per job.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from kubernetes import client, config

from airflow_provider_training.embedded import start, stop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from controller_bench import FAST, pytorchjob

RESOURCES = ("pods", "services", "events", "pytorchjobs")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        plane = start(home, env=FAST)
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=cfg)
        try:
            profile(str(plane.kubeconfig), cfg, args.runs, Path(tmp))
        finally:
            stop(home, replicas=True)


def follow(kubeconfig: str, resource: str, out: str) -> None:
    """One watch in a process of its own (no GIL shared with the others): raw lines, time-stamped."""
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    api = client.ApiClient(cfg)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    if resource == "pytorchjobs":
        resp = custom.list_namespaced_custom_object(
            "kubeflow.org", "v1", "default", "pytorchjobs", watch=True, _preload_content=False
        )
    else:
        resp = getattr(core, f"list_namespaced_{resource[:-1]}")("default", watch=True, _preload_content=False)
    buffer = b""
    with open(out, "ab", buffering=0) as sink, contextlib.suppress(Exception):
        for chunk in resp.stream(amt=None, decode_content=False):
            at = time.time()
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                sink.write(f"{at:.6f} ".encode() + line + b"\n")


def read_log(directory: Path, since: float) -> list[tuple[float, str, str, dict[str, Any]]]:
    out = []
    for resource in RESOURCES:
        path = directory / f"{resource}.log"
        if not path.exists():
            continue
        for line in path.read_bytes().splitlines():
            at, _, raw = line.partition(b" ")
            if float(at) >= since:
                event = json.loads(raw)
                out.append((float(at), resource, event["type"], event["object"]))
    return sorted(out, key=lambda e: e[0])


def profile(kubeconfig: str, cfg: client.Configuration, runs: int, directory: Path) -> None:
    followers = [
        multiprocessing.Process(target=follow, args=(kubeconfig, r, str(directory / f"{r}.log")), daemon=True)
        for r in RESOURCES
    ]
    for f in followers:
        f.start()
    time.sleep(2.0)
    api = client.ApiClient(cfg)
    custom = client.CustomObjectsApi(api)
    steps: dict[str, list[float]] = defaultdict(list)
    writes: list[int] = []
    for i in range(runs):
        name = f"prof-{i}"
        t0 = time.time()
        custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", pytorchjob(name, "pass"))
        steps["0 create answered"].append(time.time() - t0)
        deadline = time.time() + 30
        while time.time() < deadline:
            text = (directory / "pytorchjobs.log").read_bytes()
            if any(name.encode() in line and b'"Succeeded","status":"True"' in line for line in text.splitlines()):
                break
            time.sleep(0.01)
        time.sleep(0.3)  # trailing writes (folding, events)
        mine = [e for e in read_log(directory, t0) if e[3].get("metadata", {}).get("name", "").startswith(name)]
        writes.append(len(mine))
        first: dict[str, float] = {}

        pod_steps: dict[str, dict[str, float]] = defaultdict(dict)
        for at, resource, _type, body in mine:
            if resource == "pods":
                pod = body["metadata"]["name"]
                status = body.get("status") or {}
                states = [cs.get("state") or {} for cs in status.get("containerStatuses") or []]
                pod_steps[pod].setdefault("1 pod created", at - t0)
                if (body.get("spec") or {}).get("nodeName"):
                    pod_steps[pod].setdefault("2 pod scheduled (supervisor spawned)", at - t0)
                if any("running" in s or "terminated" in s for s in states):
                    pod_steps[pod].setdefault("3 container running", at - t0)
                if status.get("phase") == "Succeeded":
                    pod_steps[pod].setdefault("4 pod Succeeded", at - t0)
            elif resource == "pytorchjobs":
                first.setdefault("0 job ADDED seen by the watch", at - t0)
                conds = (body.get("status") or {}).get("conditions") or []
                if any(c["type"] == "Succeeded" and c["status"] == "True" for c in conds):
                    first.setdefault("6 job Succeeded", at - t0)
                if any(c["type"] == "Created" for c in conds):
                    first.setdefault("1 job Created condition", at - t0)
        for step in ("1 pod created", "2 pod scheduled (supervisor spawned)", "3 container running", "4 pod Succeeded"):
            values = [s[step] for s in pod_steps.values() if step in s]
            if values:
                steps[f"{step} (first)"].append(min(values))
                steps[f"{step} (last)"].append(max(values))
        for step, value in first.items():
            steps[step].append(value)
    for f in followers:
        f.terminate()
    print(f"## timeline of a 4-replica `python -c pass` PyTorchJob, median of {runs} runs (ms since create)")
    for step in sorted(steps):
        print(f"{step:45s} {statistics.median(steps[step]) * 1000:7.1f}")
    print(f"writes seen per job (pods, services, events, job): median {statistics.median(writes)}")


if __name__ == "__main__":
    main()
