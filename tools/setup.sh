#!/usr/bin/env bash
# Set up a fresh machine for this project: Debian packages the tests use, a virtualenv in .venv with
# the provider installed editable and the test tools, and CPU-only PyTorch.
# Idempotent: fast when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(docker-registry openmpi-bin chromium)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml tools/setup.sh | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
    # CPU wheel only: an unpinned torch pulls a multi-GB CUDA build.
    .venv/bin/python -m pip install -q -e ".[test]" "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
    .venv/bin/python -c "import airflow_provider_training, airflow, torch" 
    rm -f .venv/.installed-*
    touch "$stamp"
fi
