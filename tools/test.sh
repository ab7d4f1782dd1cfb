#!/usr/bin/env bash
# The project's checks, as CI runs them: lint, types, layer contracts, then the test suite.
# Usage: tools/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

echo "== ruff"; ruff check src tests benchmarks dags tools
echo "== ruff format"; ruff format --check src tests benchmarks dags tools
echo "== mypy"; mypy
echo "== import-linter"; lint-imports
echo "== pytest"; python -m pytest "$@"
