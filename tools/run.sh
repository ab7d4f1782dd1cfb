#!/usr/bin/env bash
# README's first command: set up this machine and run the main job on the embedded default.
# Today that is validating the seed examples (the control plane, KitOps and the DAG land in later
# steps; see README "Status"). Pass other YAML files to validate those instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
if [ "$#" -eq 0 ]; then
    set -- ../shared/examples/seed/*.yaml
fi
args=()
for f in "$@"; do args+=(-f "$f"); done
# validate exits 1 when a document is invalid (one seed example really is); show everything.
airflow-training validate "${args[@]}" || true
