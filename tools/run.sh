#!/usr/bin/env bash
# README's first command: set up this machine, then run the train_package_deploy DAG end to end on the
# embedded control plane with `airflow dags test`, and print the job status, the ModelKit reference
# and digest, the served URL and one prediction.
#
# State lives in .run/ (Airflow home and metadata DB, the embedded control plane, the local OCI
# registry, the ModelKit store). Run again: it reuses them. `bash tools/run.sh --clean` starts afresh.
# EPOCHS=N shortens or lengthens training (default 5). RUNTIME=oci runs the images of images/ (below).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
bash tools/setup.sh --main  # what the main job needs; tools/test.sh adds the test-only parts
export PATH="$ROOT/.venv/bin:$PATH"

STATE="$ROOT/.run"
if [ "${1:-}" = "--clean" ]; then
    airflow-training embedded stop --all --home "$STATE/training" >/dev/null 2>&1 || true
    [ -f "$STATE/registry.pid" ] && kill "$(cat "$STATE/registry.pid")" 2>/dev/null || true
    rm -rf "$STATE"
fi
mkdir -p "$STATE"
export AIRFLOW_HOME="$STATE/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW_TRAINING_HOME="$STATE/training"
export KITOPS_HOME="$STATE/kitops"

# A local OCI registry (Debian's docker-registry) on 127.0.0.1, started once and kept running.
REGISTRY_PORT="${REGISTRY_PORT:-5050}"
if ! python - "$REGISTRY_PORT" <<'EOF'
import socket, sys
s = socket.socket(); s.settimeout(0.5)
sys.exit(s.connect_ex(("127.0.0.1", int(sys.argv[1]))))
EOF
then
    mkdir -p "$STATE/registry"
    cat >"$STATE/registry/config.yml" <<EOF
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $STATE/registry/storage}, delete: {enabled: true}}
http: {addr: 127.0.0.1:$REGISTRY_PORT}
EOF
    nohup /usr/bin/docker-registry serve "$STATE/registry/config.yml" </dev/null >"$STATE/registry/registry.log" 2>&1 &
    echo $! >"$STATE/registry.pid"
    for _ in $(seq 50); do
        python -c "import socket; socket.create_connection(('127.0.0.1', $REGISTRY_PORT), 0.2)" 2>/dev/null && break
        sleep 0.1
    done
fi
export AIRFLOW_CONN_MODELKIT_REGISTRY_DEFAULT="{\"conn_type\": \"modelkit_registry\", \"host\": \"127.0.0.1:$REGISTRY_PORT\", \"extra\": {\"plain_http\": true}}"

# RUNTIME=oci: the replicas, the packaging Job and the predictor run the images of images/ (built with
# tools/images.py, pushed to this registry, mapped by the node's image table) with runc, instead of this
# machine's Python (docs/embedded.md, "Real images"). A control plane already running keeps its mode:
# add --clean when switching.
if [ "${RUNTIME:-process}" = oci ]; then
    echo "run: building the images and pushing them to 127.0.0.1:$REGISTRY_PORT (first run: minutes)"
    mkdir -p "$AIRFLOW_TRAINING_HOME"
    python tools/images.py build --push "127.0.0.1:$REGISTRY_PORT" --table "$AIRFLOW_TRAINING_HOME/image-table.yaml" \
        >"$STATE/images.log" 2>&1 || { tail -40 "$STATE/images.log" >&2; exit 1; }
    export AIRFLOW_TRAINING_RUNTIME=oci              # the daemon's node
    export AIRFLOW__TRAINING__EMBEDDED_RUNTIME=oci   # the tasks: packing runs in the packaging image's Job
fi

echo "run: preparing the Airflow metadata DB ($AIRFLOW_HOME)"
airflow db migrate >"$STATE/db-migrate.log" 2>&1 || { tail -40 "$STATE/db-migrate.log" >&2; exit 1; }
echo "run: starting the embedded control plane ($AIRFLOW_TRAINING_HOME)"
airflow-training embedded start >"$STATE/embedded-start.log" 2>&1 || { cat "$STATE/embedded-start.log" >&2; exit 1; }

echo "run: airflow dags test train_package_deploy (epochs=${EPOCHS:-5}; log: $STATE/dags-test.log)"
airflow dags test train_package_deploy -c "{\"epochs\": ${EPOCHS:-5}}" >"$STATE/dags-test.log" 2>&1 || {
    tail -60 "$STATE/dags-test.log"
    echo "the DAG run failed; full log: $STATE/dags-test.log" >&2
    exit 1
}

python - 2>"$STATE/result.log" <<'EOF' || { tail -40 "$STATE/result.log" >&2; exit 1; }
import json, os, subprocess


def value(raw):
    """XCom values are stored as JSON; older rows or plain strings come back as they are."""
    if isinstance(raw, (str, bytes)):
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode() if isinstance(raw, bytes) else raw
    return raw

from airflow.models.dagrun import DagRun
from airflow.models.xcom import XComModel
from airflow.settings import Session

with Session() as s:
    run = s.query(DagRun).filter(DagRun.dag_id == "train_package_deploy").order_by(DagRun.id.desc()).first()
    rows = s.query(XComModel).filter(XComModel.dag_id == run.dag_id, XComModel.run_id == run.run_id).all()
    x = {(r.task_id, r.key): value(r.value) for r in rows}
env = {**os.environ, "KUBECONFIG": os.path.join(os.environ["AIRFLOW_TRAINING_HOME"], "kubeconfig")}
job = x.get(("train", "job_name"))
print(f"DAG run {run.run_id}: {run.state}")
if job:
    status = subprocess.run(["kubectl", "get", "pytorchjob", job, "-o", "jsonpath={.status.conditions[-1].type}"],
                            env=env, capture_output=True, text=True).stdout
    print(f"PyTorchJob {job}: {status}")
print(f"ModelKit: {x[('package', 'reference')]}  digest {x[('package', 'digest')]}")
print(f"served at: {x[('deploy', 'url')]}/v2/models/digits/infer")
smoke = x[("smoke_test", "return_value")]
print(f"prediction: the first test digit (a {smoke['first_label']}) was classified as {smoke['first_prediction']}; "
      f"accuracy on 100 digits {smoke['accuracy']:.2f}")
EOF
echo "run: done. The model keeps serving; stop everything with: airflow-training embedded stop --all --home $STATE/training; kill \$(cat $STATE/registry.pid)"
