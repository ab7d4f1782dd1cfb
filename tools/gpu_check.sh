#!/usr/bin/env bash
# Run the example training on GPUs through the embedded control plane, once, on a machine with
# NVIDIA GPUs (CI stays CPU-only). It starts a private control plane (GPUs from nvidia-smi), applies
# a PyTorchJob whose replicas each ask for `nvidia.com/gpu: 1` (as the seed's YAML does) — Master +
# Worker when there are two GPUs or more (DDP over NCCL), Master alone on a one-GPU machine — waits,
# and prints what happened: the GPU each replica got, the backend, accuracy and seconds.
#
#   bash tools/gpu_check.sh            # EPOCHS=N (default 20); PYTHON=... to use another Python with torch
#
# Needs a Python with this project installed and a CUDA build of torch: `bash tools/setup.sh` makes
# .venv (then `pip install torch` there if its torch is CPU-only); the script uses .venv if present.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
PY="$("$PY" -c 'import sys; print(sys.executable)')"  # absolute: the replicas run it
EPOCHS="${EPOCHS:-20}"

echo "gpu-check: GPUs on this machine:"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | sed 's/^/  /' || {
    echo "gpu-check: nvidia-smi failed: no NVIDIA GPU here" >&2
    exit 1
}
"$PY" - <<'EOF' || { echo "gpu-check: this Python's torch cannot use CUDA (install a CUDA build of torch)" >&2; exit 1; }
import torch
print(f"  torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, {torch.cuda.device_count()} visible")
assert torch.cuda.is_available()
EOF

WORK="$(mktemp -d /tmp/gpu-check-XXXXXX)"
HOME_DIR="$WORK/plane"
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
REPLICAS=$((GPUS >= 2 ? 2 : 1))
cleanup() { "$PY" -m airflow_provider_training.cli embedded stop --all --home "$HOME_DIR" >/dev/null 2>&1 || true; }
trap cleanup EXIT

mkdir -p "$HOME_DIR"
# the example image runs this checkout's dags/code (as the DAGs' replicas do)
cat >"$HOME_DIR/images.yaml" <<EOF
images:
  - match: "ccr.ccs.tencentyun.com/ml-models/digits-train:*"
    workingDir: $ROOT/dags/code
EOF
echo "gpu-check: starting the embedded control plane in $HOME_DIR"
"$PY" -m airflow_provider_training.cli embedded start --home "$HOME_DIR" >"$WORK/start.log" 2>&1 || {
    cat "$WORK/start.log" >&2
    exit 1
}

replica() {  # replica TYPE
    cat <<EOF
      $1:
        replicas: 1
        restartPolicy: Never
        template:
          spec:
            containers:
              - name: pytorch
                image: ccr.ccs.tencentyun.com/ml-models/digits-train:latest
                command: ["$PY", "train.py", "--epochs=$EPOCHS", "--output=$WORK/out"]
                resources:
                  limits:
                    nvidia.com/gpu: 1
EOF
}
{
    cat <<EOF
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: gpu-check
  namespace: default
spec:
  pytorchReplicaSpecs:
EOF
    replica Master
    [ "$REPLICAS" -eq 2 ] && replica Worker
} >"$WORK/job.yaml"
export KUBECONFIG="$HOME_DIR/kubeconfig"
"$PY" - "$WORK/job.yaml" "$REPLICAS" "$EPOCHS" <<'EOF'
import json, sys, time
from pathlib import Path

import yaml
from kubernetes import client, config

job = yaml.safe_load(Path(sys.argv[1]).read_text())
replicas, epochs = int(sys.argv[2]), sys.argv[3]
config.load_kube_config()
custom, core = client.CustomObjectsApi(), client.CoreV1Api()
print(f"gpu-check: PyTorchJob gpu-check, {replicas} replica(s) x nvidia.com/gpu: 1, {epochs} epochs")
started = time.time()
custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", job)
state = ""
while time.time() - started < 900:
    obj = custom.get_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", "gpu-check")
    conditions = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or [] if c["status"] == "True"}
    state = next((s for s in ("Succeeded", "Failed") if s in conditions), "")
    if state:
        break
    time.sleep(0.5)
seconds = time.time() - started
print(f"gpu-check: job {state or 'did not finish'} after {seconds:.1f} s (submit to Succeeded)")
for pod in core.list_namespaced_pod("default", label_selector="training.kubeflow.org/job-name=gpu-check").items:
    env = {e.name: e.value for c in pod.spec.containers for e in (c.env or [])}
    log = core.read_namespaced_pod_log(pod.metadata.name, "default")
    lines = [l for l in log.splitlines() if "starting on" in l or "test accuracy" in l or "Error" in l]
    print(f"  {pod.metadata.name}: phase {pod.status.phase}")
    for line in lines[-4:]:
        print(f"    {line}")
    if state != "Succeeded":
        print("    " + "\n    ".join(log.splitlines()[-30:]))
events = core.list_namespaced_event("default").items
for e in events:
    if e.type == "Warning" or e.reason == "FailedScheduling":
        print(f"  event {e.reason}: {e.message}")
metrics = Path(job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"][-1].split("=", 1)[1]) / "metrics.json"
if metrics.exists():
    m = json.loads(metrics.read_text())
    print(f"gpu-check: device {m.get('device')}, backend {m.get('backend') or 'none (one replica)'}, "
          f"world size {m.get('world_size')}, accuracy {m['accuracy']:.4f}, training {m.get('train_seconds')} s")
sys.exit(0 if state == "Succeeded" else 1)
EOF
