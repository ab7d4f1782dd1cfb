#!/usr/bin/env bash
# Set up a fresh machine for this project: Debian packages the tests use, a virtualenv in .venv with
# the provider installed editable and the test tools, and CPU-only PyTorch.
# Idempotent: fast (and silent) when everything is already there. Prints progress lines only; the
# tools' own output goes to .venv/setup.log (shown when a step fails).
set -euo pipefail
cd "$(dirname "$0")/.."

# --main: only what tools/run.sh (the main job) needs; the default adds what only the tests use
# (chromium for the UI tests, PostgreSQL for the deployment tier, the client-37 environment).
MODE=all
[ "${1:-}" = "--main" ] && MODE=main
APT_PACKAGES=(
    docker-registry
    openmpi-bin
)
[ "$MODE" = main ] || APT_PACKAGES+=(chromium)
# the seed's troubleshooting commands, run through kubectl exec: nc -zv <master-pod-ip> <port>, ping
APT_PACKAGES+=(netcat-openbsd iputils-ping)
# the images of images/ (tools/images.py: buildah, a base from Debian's packages with mmdebstrap) and the
# embedded node's image mode (runc); skopeo for benchmarks/images.py's baseline
APT_PACKAGES+=(buildah runc mmdebstrap)
[ "$MODE" = main ] || APT_PACKAGES+=(skopeo)
# the deployment tier's metadata DB (Airflow's SQLite allows one writer; five processes write at once)
[ "$MODE" = main ] || APT_PACKAGES+=(postgresql)
# CPU wheel only: an unpinned torch pulls a multi-GB CUDA build.
TORCH="torch==2.13.0"

LOG=.venv/setup.log
step() {  # step "what" command...: one progress line; the command's output only if it fails
    echo "setup: $1"
    if ! "${@:2}" >>"$LOG" 2>&1; then
        echo "setup: failed: $1 (last lines of $LOG):" >&2
        tail -40 "$LOG" >&2
        exit 1
    fi
}

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    "$PYTHON" -m venv .venv
fi
: >"$LOG"

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    step "updating the apt package lists" $SUDO apt-get update -qq
    step "installing Debian packages: ${missing[*]}" \
        env DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

stamp=.venv/.installed-$(cat pyproject.toml tools/setup.sh | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
    step "upgrading pip" .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
    step "installing the provider, Airflow, the test tools and $TORCH (first run: a few minutes)" \
        .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]" "$TORCH"
    # setuptools' editable install leaves src/airflow_provider_training.egg-info behind; src is on
    # sys.path, so importlib.metadata then finds the distribution twice and Airflow loads the UI
    # plugin's entry point twice ("Plugin Import Error: 1" on the home page, a warning in every
    # process). The dist-info in .venv has everything the editable install needs.
    rm -rf src/*.egg-info
    step "checking the installation" .venv/bin/python -c "import airflow_provider_training, airflow, torch"
    rm -f .venv/.installed-*
    touch "$stamp"
    echo "setup: ready (.venv)"
fi

# The newest official Python client (pydantic models, strict types) in a venv of its own: the
# conformance tests check that everything the embedded API server returns deserialises in it
# (Airflow's constraints pin the main venv's client lower). tests/fixtures/client37.py makes it too.
CLIENT37_SPEC="kubernetes>=37,<38"
if [ "$MODE" = main ]; then
    exit 0
fi
if ! .venv-client37/bin/python -c "import kubernetes, sys; sys.exit(int(kubernetes.__version__.split('.')[0]) != 37)" 2>/dev/null; then
    step "creating .venv-client37 ($CLIENT37_SPEC)" "$PYTHON" -m venv .venv-client37
    step "installing $CLIENT37_SPEC into .venv-client37" \
        .venv-client37/bin/python -m pip install -q --disable-pip-version-check "$CLIENT37_SPEC"
fi
