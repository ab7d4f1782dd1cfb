"""CI's Airflow-version tier: the operator, sensor, trigger and ``dag.test()`` tests on the lowest
supported Airflow and on the newest pre-release, each in a venv of its own beside ``.venv`` (the main
suite runs on the Airflow in ``.venv``).

    .venv/bin/python tools/airflow_versions.py [3.2 | 3.4 ...] [-- pytest args]

A venv is made on first use and reused while every requirement below is still satisfied and the
provider is installed editable from this checkout. It is made with ``uv`` (``.venv``'s, from the
test extra; both venvs in 15 s with an empty cache) where there is one, else with pip (about 3
minutes each). Neither venv has PyTorch: the tests' training replicas run on ``.venv``'s Python, as
on a cluster they run in an image of their own (``$TRAINING_IMAGE_PYTHON``,
tests/fixtures/control_plane.py).
Airflow's constraints files are not reachable here, so the few pins that Airflow's constraints would
have set, where a newer library breaks that Airflow release itself, are listed with the reason.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures._sidevenv import SideVenvError, ensure_venv  # noqa: E402

CNCF_KUBERNETES = "apache-airflow-providers-cncf-kubernetes==10.25.0"  # as in .venv; supports Airflow >= 2.11
TEST_TOOLS = ["pytest>=8", "pytest-timeout>=2.3"]
VERSIONS: dict[str, tuple[str, list[str]]] = {
    # the lowest supported release
    "3.2": (
        ".venv-airflow32",
        [
            "apache-airflow==3.2.2",
            # FastAPI 0.137+ rejects 3.2.2's Execution API models at import ("needs a discriminator
            # field"); 3.3 caps it the same way
            "fastapi<0.137",
            # svcs 26 detaches its registry from app.state when a lifespan ends, and 3.2.2's dag.test()
            # ends the in-process API's lifespan after the first request: every task then fails
            # ("'State' object has no attribute 'svcs_registry'"); 3.3 keeps the lifespan alive
            "svcs<26",
        ],
    ),
    # the newest pre-release on PyPI (3.4.0 itself is not installable here yet)
    "3.4": (".venv-airflow34", ["apache-airflow==3.4.0b2"]),
}
# What touches Airflow runs here: deferral and resuming, triggers on the shared watch, sensors in every
# mode, reattach after a worker crash (no task state store before 3.3), the kill paths, the approval
# (Human-in-the-loop), provider discovery, extra links and the UI plugin's loading, the shipped DAGs'
# parsing and one of them end to end. Not the deployment, cockpit, kitops or controller tiers: they
# exercise the provider's own code the same way on every Airflow.
TESTS = [
    "tests/operators/test_airflow_versions.py",
    "tests/operators/test_approval.py",
    "tests/operators/test_deferrable_and_sensor.py",
    "tests/operators/test_end_from_trigger.py",
    "tests/operators/test_shared_watches.py",
    "tests/operators/test_sync.py",
    "tests/operators/test_worker_crash_and_kill.py",
    "tests/operators/test_policy_and_serialization.py",
    "tests/operators/test_trigger_imports.py",
    "tests/test_provider_registration.py",
    "tests/ui/test_links.py",
    "tests/ui/test_plugin_import.py",
    "tests/ui/test_plugin_once.py",
    "tests/dags/test_dags.py::test_dagbag_loads_every_dag_without_import_errors",
    "tests/dags/test_dags.py::test_ui_triggered_training_refuses_invalid_params",
    "tests/dags/test_dags.py::test_example_dag_runs_end_to_end[tfjob_example-conf1-ran1]",
]
# One DAG run per kind repeats what test_sync's other tests cover on every version.
DESELECT = ["tests/operators/test_sync.py::test_the_typed_operator_of_every_kind"]


def _check(requirements: list[str]) -> str:
    """Python that exits 0 when every requirement is met and the provider is this checkout's, editable."""
    return f"""
import importlib.metadata as m, sys
from packaging.requirements import Requirement
for text in {[*requirements, *TEST_TOOLS]!r}:
    r = Requirement(text)
    if not r.specifier.contains(m.version(r.name), prereleases=True):
        sys.exit(f"{{r.name}} {{m.version(r.name)}} does not satisfy {{text}}")
import airflow_provider_training
sys.exit(airflow_provider_training.__file__ != {str(ROOT / "src" / "airflow_provider_training" / "__init__.py")!r})
"""


def _uv() -> str | None:
    """``.venv``'s uv (the test extra), else one on PATH."""
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.exists() else shutil.which("uv")


def venv_for(version: str) -> Path:
    name, requirements = VERSIONS[version]
    python = ensure_venv(
        name, [*requirements, CNCF_KUBERNETES, *TEST_TOOLS, "-e", str(ROOT)], _check(requirements), uv=_uv()
    )
    # setuptools' editable install leaves src/*.egg-info behind: with src on sys.path Airflow would then
    # find the distribution twice (see tools/setup.sh)
    for leftover in (ROOT / "src").glob("*.egg-info"):
        shutil.rmtree(leftover)
    return python


LOGS = ROOT / ".run" / "airflow-versions"


def main(argv: list[str]) -> int:
    versions = [a for a in argv if a in VERSIONS] or list(VERSIONS)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env["PYTHONPATH"] = f"{ROOT / 'src'}{os.pathsep}{ROOT}"
    # The training replicas (PyTorch, scikit-learn) run on .venv's Python, as on a cluster they run in
    # an image of their own: the side venvs hold Airflow and the provider only (tests/fixtures/control_plane.py)
    training_python = ROOT / ".venv" / "bin" / "python"
    if not training_python.exists():
        print(f"{training_python} is missing: run tools/setup.sh first", file=sys.stderr)
        return 1
    env["TRAINING_IMAGE_PYTHON"] = str(training_python)
    started = time.monotonic()
    failed, pythons = [], {}
    for version in versions:
        try:
            pythons[version] = venv_for(version)
        except SideVenvError as exc:
            print(f"airflow {version}: {exc}", file=sys.stderr)
            failed.append(version)
    made = time.monotonic() - started
    # Both versions at once: each session has its own control plane, registry and Airflow home, and
    # most of a session is waiting on jobs and triggers (2 shared cores: tests 269-292 s together,
    # 277 s + 189 s one after the other)
    LOGS.mkdir(parents=True, exist_ok=True)
    deselect = [arg for test in DESELECT for arg in ("--deselect", test)]
    running = {}
    try:
        for version, python in pythons.items():
            with open(LOGS / f"{version}.log", "w") as log:
                running[version] = subprocess.Popen(
                    [str(python), "-m", "pytest", *TESTS, *deselect, "-q", "-p", "no:cacheprovider", *extra],
                    cwd=ROOT,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
        codes = {version: process.wait() for version, process in running.items()}
    finally:
        for process in running.values():  # interrupted: let pytest tear its daemons down
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                process.wait(120)
    for version, code in codes.items():
        print(f"== airflow {version} ({LOGS / f'{version}.log'})")
        print((LOGS / f"{version}.log").read_text(errors="replace").rstrip())
        if code != 0:
            failed.append(version)
    print(f"Airflow-version tier: venvs {made:.0f} s, tests {time.monotonic() - started - made:.0f} s")
    if failed:
        print(f"Airflow-version tier failed on {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
