#!/usr/bin/env bash
# The project's checks, as CI runs them: lint, types, layer contracts, then the test suite.
# Usage: tools/test.sh [pytest args...]
# Without pytest args (as CI runs it) the Airflow-version tier follows the suite: the operator, sensor,
# trigger and dag.test() tests again on the lowest supported Airflow and on the newest 3.4 pre-release,
# in venvs of their own (tools/airflow_versions.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
# Bytecode for the project's own modules and tests: where PYTHONDONTWRITEBYTECODE is set (this CI
# image sets it), every pytest run re-compiled and re-rewrote them all (collection 12.4 s -> 5.7 s),
# and so did every daemon and Airflow process a test starts (``__pycache__`` is git-ignored).
unset PYTHONDONTWRITEBYTECODE

# The full run builds the images image mode's tests use (tests/fixtures/images.py). Cold, on a fresh
# machine, that is minutes of pip and dpkg: started here, it overlaps lint and the tests before the
# first one needs an image, whose build then waits for this one (tools/images.py takes a lock) and
# finds every layer cached. Its output goes to a log; it is stopped if the run ends first.
if [ $# -eq 0 ] && [ "$(id -u)" = 0 ] && command -v buildah >/dev/null && command -v runc >/dev/null; then
    mkdir -p .ci-logs
    setsid python tools/images.py build training packaging predictor </dev/null >.ci-logs/images-warmup.log 2>&1 &
    warmup=$!
    trap 'kill -- "-$warmup" 2>/dev/null || true' EXIT
fi

echo "== ruff"; ruff check src tests benchmarks dags tools
echo "== ruff format"; ruff format --check src tests benchmarks dags tools
echo "== mypy"; mypy
echo "== import-linter"; lint-imports
echo "== pytest"; python -m pytest "$@"
if [ $# -eq 0 ]; then
    echo "== Airflow versions"; python tools/airflow_versions.py
fi
