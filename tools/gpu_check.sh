#!/usr/bin/env bash
# Run the example training on GPUs through the embedded control plane, once, on a machine with
# NVIDIA GPUs (CI stays CPU-only), and print what happened: the GPU each replica got, the backend,
# accuracy and seconds. Needs no Airflow, no venv and no network: a Python with a CUDA build of torch,
# scikit-learn and the provider's runtime dependencies (PYTHONPATH may carry them); this checkout's
# src/ is put on PYTHONPATH.
#
#   bash tools/gpu_check.sh            # PYTHON=python3 (default), EPOCHS=20
#
# Jobs (each replica asks for `nvidia.com/gpu: 1`, as the seed's YAML does):
#   two GPUs or more: Master + Worker, DDP over NCCL;
#   one GPU: first Master + Worker, which cannot both get a GPU — the control plane keeps the job's
#   pods Pending with a FailedScheduling event (gang admission), shown and then deleted — then the
#   Master alone on the GPU. (Two replicas cannot share one GPU under NCCL: "Duplicate GPU detected".)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PY="$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')"  # absolute: the replicas run it
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
EPOCHS="${EPOCHS:-20}"

echo "gpu-check: GPUs on this machine:"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | sed 's/^/  /' || {
    echo "gpu-check: nvidia-smi failed: no NVIDIA GPU here" >&2
    exit 1
}
"$PY" - <<'EOF' || { echo "gpu-check: $PY's torch cannot use CUDA (a CUDA build of torch is needed)" >&2; exit 1; }
import os, torch
if not torch.cuda.is_available() and os.environ.get("GPU_CHECK_DRY_RUN") == "1":  # the script's own test, on CPU
    print(f"  torch {torch.__version__}: no CUDA; GPU_CHECK_DRY_RUN=1 trains on CPU")
    raise SystemExit(0)
assert torch.cuda.is_available()
print(f"  torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}")
EOF

WORK="$(mktemp -d /tmp/gpu-check-XXXXXX)"
PLANE="$WORK/plane"
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
cleanup() { "$PY" -m airflow_provider_training.cli embedded stop --all --home "$PLANE" >/dev/null 2>&1 || true; }
trap cleanup EXIT
mkdir -p "$PLANE"
# the example's image runs this checkout's dags/code (as the DAGs' replicas do)
cat >"$PLANE/images.yaml" <<EOF
images:
  - match: "ccr.ccs.tencentyun.com/ml-models/digits-train:*"
    workingDir: $ROOT/dags/code
EOF
echo "gpu-check: starting the embedded control plane in $PLANE"
"$PY" -m airflow_provider_training.cli embedded start --home "$PLANE" >"$WORK/start.log" 2>&1 || {
    cat "$WORK/start.log" >&2
    exit 1
}

"$PY" - "$PLANE/kubeconfig" "$PY" "$EPOCHS" "$WORK" "$GPUS" <<'EOF'
import json, sys, time
from pathlib import Path

from kubernetes import client, config

kubeconfig, python, epochs, work, gpus = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]), int(sys.argv[5])
config.load_kube_config(config_file=kubeconfig)
custom, core = client.CustomObjectsApi(), client.CoreV1Api()
PLURAL = ("kubeflow.org", "v1", "default", "pytorchjobs")


def replica(output: Path) -> dict:
    container = {
        "name": "pytorch",
        "image": "ccr.ccs.tencentyun.com/ml-models/digits-train:latest",
        "command": [python, "train.py", f"--epochs={epochs}", f"--output={output}"],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    return {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}


def submit(name: str, types: list[str]) -> Path:
    output = work / name
    specs = {t: replica(output) for t in types}
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}, "spec": {"pytorchReplicaSpecs": specs}}
    custom.create_namespaced_custom_object(*PLURAL, job)
    print(f"gpu-check: PyTorchJob {name}: {' + '.join(types)}, nvidia.com/gpu: 1 each, {epochs} epochs")
    return output


def pods(name: str) -> list:
    return core.list_namespaced_pod("default", label_selector=f"training.kubeflow.org/job-name={name}").items


def scheduling_events(name: str) -> list[str]:
    return [f"{e.involved_object.name}: {e.reason}: {e.message}" for e in core.list_namespaced_event("default").items
            if e.reason == "FailedScheduling" and e.involved_object.name.startswith(name)]


def wait(name: str, timeout: float = 900) -> tuple[str, float]:
    started = time.time()
    while time.time() - started < timeout:
        obj = custom.get_namespaced_custom_object(*PLURAL, name)
        conditions = {c["type"] for c in (obj.get("status") or {}).get("conditions") or [] if c["status"] == "True"}
        for state in ("Succeeded", "Failed"):
            if state in conditions:
                return state, time.time() - started
        time.sleep(0.5)
    return "not finished", time.time() - started


def report(name: str, output: Path, state: str, seconds: float) -> bool:
    print(f"gpu-check: {name} {state} after {seconds:.1f} s (submit to {state})")
    for pod in pods(name):
        log = core.read_namespaced_pod_log(pod.metadata.name, "default", _preload_content=False).data.decode()
        print(f"  {pod.metadata.name}: {pod.status.phase}")
        for line in [l for l in log.splitlines() if "starting on" in l or "test accuracy" in l][-3:]:
            print(f"    {line}")
        if state != "Succeeded":
            print("    " + "\n    ".join(log.splitlines()[-30:]))
    metrics = output / "metrics.json"
    if metrics.exists():
        m = json.loads(metrics.read_text())
        print(f"gpu-check: RESULT device {m.get('device')}, backend {m.get('backend') or 'none (one replica)'}, "
              f"world size {m.get('world_size')}, accuracy {m['accuracy']:.4f}, training {m.get('train_seconds')} s, "
              f"job {seconds:.1f} s")
    return state == "Succeeded"


if gpus >= 2:
    out = submit("gpu-check-ddp", ["Master", "Worker"])
    ok = report("gpu-check-ddp", out, *wait("gpu-check-ddp"))
else:
    submit("gpu-check-two", ["Master", "Worker"])
    deadline = time.time() + 60
    while time.time() < deadline and not scheduling_events("gpu-check-two"):
        time.sleep(0.5)
    print(f"gpu-check: with {gpus} GPU, gpu-check-two's pods: "
          + ", ".join(f"{p.metadata.name} {p.status.phase}" for p in pods("gpu-check-two")))
    for line in scheduling_events("gpu-check-two")[:2]:
        print(f"  event {line}")
    custom.delete_namespaced_custom_object(*PLURAL, "gpu-check-two")
    out = submit("gpu-check-one", ["Master"])
    ok = report("gpu-check-one", out, *wait("gpu-check-one"))
sys.exit(0 if ok else 1)
EOF
