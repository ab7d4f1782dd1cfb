"""The phases of train -> package -> deploy on the embedded control plane, against a baseline.

Phases (as the ``train_package_deploy`` DAG runs them, without Airflow's own task overhead):
train (PyTorchJob Master + Worker, submitted to the control plane, until ``Succeeded``), pack,
push (to a local docker-registry), deploy-ready (InferenceService created until ``Ready``) and the
first prediction through the served URL. Baseline measured in the same run: the same DDP training
as two plain processes (``RANK``/``WORLD_SIZE`` set by hand), which is what the training itself
costs; the difference is the project's overhead.

    PYTHONPATH=src python benchmarks/dag_train_package_deploy.py [--epochs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def baseline(epochs: int, out: Path) -> float:
    port = free_port()
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "dags/code/train.py"), f"--epochs={epochs}", f"--output={out}"],
            env={**os.environ, "RANK": str(r), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        for r in range(2)
    ]
    assert all(p.wait() == 0 for p in procs)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-tpd-"))
    os.environ["KITOPS_HOME"] = str(tmp / "kitops")
    sys.path.insert(0, str(ROOT))
    from kubernetes import client, config
    from tests.fixtures.registry import RunningRegistry

    from airflow_provider_training import embedded
    from airflow_provider_training.kitops import pack as packmod
    from airflow_provider_training.kitops import transfer
    from airflow_provider_training.kitops.api import make_client
    from airflow_provider_training.kitops.localstore import LocalStore
    from airflow_provider_training.kitops.reference import parse

    registry = RunningRegistry(tmp / "registry")
    registry.start()
    plane = embedded.start(tmp / "home", env={"AIRFLOW_TRAINING_WORKDIR": str(ROOT / "dags")})
    api = config.new_client_from_config(config_file=str(plane.kubeconfig))
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    phases: dict[str, float] = {}
    try:
        base = baseline(args.epochs, tmp / "baseline")
        container = {
            "name": "pytorch",
            "image": "bench",
            "command": ["python", "code/train.py", f"--epochs={args.epochs}", "--output=/output/run"],
            "volumeMounts": [{"name": "output", "mountPath": "/output"}],
        }
        replica = {
            "replicas": 1,
            "restartPolicy": "OnFailure",
            "template": {
                "spec": {
                    "containers": [container],
                    "volumes": [{"name": "output", "persistentVolumeClaim": {"claimName": "out"}}],
                }
            },
        }
        job = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "bench"},
            "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": replica}},
        }
        t = time.perf_counter()
        custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", job)
        while True:
            obj = custom.get_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", "bench")
            conds = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
            if conds.get("Succeeded") == "True":
                break
            assert conds.get("Failed") != "True", obj["status"]
            time.sleep(0.05)
        phases["train"] = time.perf_counter() - t
        output = plane.home / "volumes/pvc/default/out/run"
        ref = parse(f"{registry.host}/bench/digits:v1")
        t = time.perf_counter()
        packmod.pack(output, reference=ref)
        phases["pack"] = time.perf_counter() - t
        t = time.perf_counter()
        with make_client(ref.registry, plain_http=True) as c:
            transfer.push(LocalStore(), ref, c)
        phases["push"] = time.perf_counter() - t
        core.create_namespaced_secret(
            "default", {"metadata": {"name": "kitops-credentials"}, "stringData": {"KIT_UNPACK_FLAGS": "--plain-http"}}
        )
        isvc = {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "digits", "annotations": {"serving.kserve.io/storage-secret": "kitops-credentials"}},
            "spec": {"predictor": {"model": {"modelFormat": {"name": "pytorch"}, "storageUri": f"kit://{ref}"}}},
        }
        t = time.perf_counter()
        custom.create_namespaced_custom_object("serving.kserve.io", "v1beta1", "default", "inferenceservices", isvc)
        while True:
            obj = custom.get_namespaced_custom_object(
                "serving.kserve.io", "v1beta1", "default", "inferenceservices", "digits"
            )
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (obj.get("status") or {}).get("conditions") or []
            ):
                break
            time.sleep(0.02)
        phases["deploy-ready"] = time.perf_counter() - t
        import httpx

        t = time.perf_counter()
        body = {"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "FP32", "data": [0.0] * 64}]}
        assert httpx.post(f"{obj['status']['url']}/v2/models/digits/infer", json=body).status_code == 200
        phases["first prediction"] = time.perf_counter() - t
        custom.delete_namespaced_custom_object("serving.kserve.io", "v1beta1", "default", "inferenceservices", "digits")
        time.sleep(1.5)
    finally:
        embedded.stop(tmp / "home", replicas=True)
        registry.stop()
    total = sum(phases.values())
    print(json.dumps({k: round(v, 3) for k, v in phases.items()}))
    print(f"baseline: the same DDP training as 2 plain processes: {base:.2f}s")
    print(f"train phase / baseline: {phases['train'] / base:.2f}x (overhead {phases['train'] - base:+.2f}s)")
    print(
        f"whole pipeline: {total:.2f}s = {total / base:.2f}x the training itself; project overhead {total - base:.2f}s"
    )


if __name__ == "__main__":
    main()
