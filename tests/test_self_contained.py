"""A clone of the repository with nothing beside it runs its data-dependent tests: nothing outside the
checkout is referenced by the tracked files or opened by the tests (Python's audit hook records every
file open of the child test run)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.paths import ROOT

# Tests that read tests/data/: the seed examples, the validate CLI on them, KitOps' Kitfile cases, the
# Helm values against the chart schema subset.
DATA_TESTS = [
    "tests/specs/test_seed_examples.py",
    "tests/cli/test_validate_command.py",
    "tests/kitops/test_kitfile.py",
    "tests/deployment/test_helm_values.py",
]
OUTSIDE_MARKERS = ("../shared", "/work/shared", "AIRFLOW_TRAINING_SHARED")

# Loaded by the child Python through PYTHONPATH: records each opened path that lies beside the clone
# (in the directory that holds it, but outside it) or under a folder named "shared" next to it.
AUDIT = """
import os, sys
_parent = os.environ["SELF_CONTAINED_PARENT"]
_clone = os.environ["SELF_CONTAINED_CLONE"]
_out = os.environ["SELF_CONTAINED_LOG"]
def _hook(event, args):
    if event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.path.abspath(os.fsdecode(args[0]))
    if path == _out:
        return
    outside = path.startswith(_parent + os.sep) and not (path + os.sep).startswith(_clone + os.sep)
    if outside or "/shared/" in path:
        with open(_out, "a") as log:
            log.write(path + "\\n")
sys.addaudithook(_hook)
"""


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    parent = tmp_path_factory.mktemp("empty")
    target = parent / "repo"
    # The committed HEAD, as a user or contributor gets it.
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(target)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return target


def test_tracked_files_name_nothing_outside_the_checkout(clone: Path) -> None:
    found = subprocess.run(
        [
            "git",
            "grep",
            "-n",
            "-I",
            "-F",
            *(arg for m in OUTSIDE_MARKERS for arg in ("-e", m)),
            "--",
            ".",
            ":!tests/test_self_contained.py",
        ],
        cwd=clone,
        capture_output=True,
        text=True,
    )
    assert found.returncode == 1, f"tracked files refer to a folder outside the repository:\n{found.stdout}"


def test_data_dependent_tests_pass_from_a_clone_and_open_nothing_beside_it(clone: Path, tmp_path: Path) -> None:
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(textwrap.dedent(AUDIT))
    log = tmp_path / "opened-outside.log"
    env = {
        **os.environ,
        # The clone's own sources first, so the editable install of this checkout is not what runs.
        "PYTHONPATH": os.pathsep.join([str(hook_dir), str(clone / "src"), str(clone)]),
        "SELF_CONTAINED_PARENT": str(clone.parent),
        "SELF_CONTAINED_CLONE": str(clone),
        "SELF_CONTAINED_LOG": str(log),
    }
    env.pop("AIRFLOW_HOME", None)  # the clone's conftest makes its own
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *DATA_TESTS],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " skipped" not in done.stdout, done.stdout[-2000:]
    opened = log.read_text().splitlines() if log.exists() else []
    assert not opened, f"the tests opened files outside the clone: {sorted(set(opened))[:20]}"
