"""The wheel as a user installs it: it builds without setuptools deprecation warnings, and in a clean
virtualenv *without Airflow* (the wheel with ``--no-deps`` plus its non-Airflow dependencies) the
standalone tools work: ``airflow-training embedded start``/``status``/``stop``, ``validate`` and
``kit pack``.

Airflow stays a required dependency of the distribution (it is an Airflow provider: inside an
Airflow installation pip must enforce ``apache-airflow>=3.3``); what this test guards is that the
command-line tools never need it, and that everything they import is declared (uvicorn's ``uvloop``
and ``httptools`` used to arrive only through Airflow).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.paths import ROOT, SEED

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _run(*argv: str | Path, timeout: float = 600, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    had_egg_info = set((ROOT / "src").glob("*.egg-info"))
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", out, ROOT)
    # setuptools writes src/*.egg-info while building; left there, it is a second distribution of
    # the provider on sys.path and every later Airflow process loads the UI plugin twice.
    for leftover in set((ROOT / "src").glob("*.egg-info")) - had_egg_info:
        shutil.rmtree(leftover)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "Deprecat" not in built.stdout + built.stderr, (built.stdout + built.stderr)[-3000:]
    [path] = out.glob("airflow_provider_training-*.whl")
    return path


def requires(wheel: Path) -> list[str]:
    """The wheel's ``Requires-Dist`` lines (what pip installs with it), extras left out."""
    metadata = metadata_of(wheel)
    lines = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    return [line for line in lines if "extra ==" not in line]


def metadata_of(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(name).decode()


@pytest.fixture(scope="module")
def clean_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    venv = tmp_path_factory.mktemp("clean") / "venv"
    made = _run(sys.executable, "-m", "venv", venv)
    assert made.returncode == 0, made.stderr
    standalone = [d for d in requires(wheel) if not d.lower().startswith("apache-airflow")]
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    installed = _run(*pip, *standalone)
    assert installed.returncode == 0, installed.stderr[-3000:]
    installed = _run(*pip, "--no-deps", wheel)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv


def test_wheel_metadata_has_an_spdx_license_and_the_server_dependencies(wheel):
    assert "License-Expression: Apache-2.0" in metadata_of(wheel)
    declared = requires(wheel)
    for needed in ("uvicorn", "uvloop", "httptools", "websockets", "apache-airflow"):
        assert any(line.startswith(needed) for line in declared), (needed, declared)


def test_standalone_tools_run_in_a_virtualenv_without_airflow(clean_venv, tmp_path):
    python, cli = clean_venv / "bin" / "python", clean_venv / "bin" / "airflow-training"
    assert _run(python, "-c", "import airflow").returncode != 0  # really no Airflow here
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "KITOPS", "PYTHONPATH"))}
    env |= {
        "HOME": str(tmp_path),
        "KITOPS_HOME": str(tmp_path / "kitops"),
        "PATH": f"{clean_venv / 'bin'}:/usr/bin:/bin",
    }
    home = tmp_path / "plane"

    started = _run(cli, "embedded", "start", "--home", home, env=env, timeout=120)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert "https://127.0.0.1:" in started.stdout
        status = _run(cli, "embedded", "status", "--home", home, env=env, timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
    finally:
        stopped = _run(cli, "embedded", "stop", "--all", "--home", home, env=env, timeout=60)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr

    validated = _run(cli, "validate", "-f", SEED / "tfjob-multiworker.yaml", env=env, timeout=60)
    assert validated.returncode == 0, validated.stdout + validated.stderr

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.bin").write_bytes(b"\x00" * 1024)
    (model / "Kitfile").write_text(
        'manifestVersion: "1.0"\npackage:\n  name: tiny\nmodel:\n  name: tiny\n  path: model.bin\n'
    )
    packed = _run(cli, "kit", "pack", model, "-t", "127.0.0.1:5000/ml-models/tiny:v1", env=env, timeout=60)
    assert packed.returncode == 0, packed.stdout + packed.stderr
    listed = _run(cli, "kit", "list", env=env, timeout=60)
    assert "ml-models/tiny" in listed.stdout and "v1" in listed.stdout, listed.stdout + listed.stderr
