#!/usr/bin/env bash
# Rebuild the cockpit's bundle (src/airflow_provider_training/ui/static/cockpit.js) from frontend/src.
# Needs Node >= 18 and the npm registry; the built file is committed, so users never need either.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund 2>/dev/null || npm install --no-audit --no-fund
npx vite build
ls -l ../src/airflow_provider_training/ui/static/cockpit.js
