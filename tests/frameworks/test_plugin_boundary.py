"""MPI's own path stays behind its plugin: no kind or operator-name test or MPIPlugin check anywhere else
in src/."""

from __future__ import annotations

import re
from pathlib import Path

import airflow_provider_training

SRC = Path(airflow_provider_training.__file__).parent
MPI_BRANCH = re.compile(
    r"""[!=]=\s*["'](MPIJob|mpijob-controller)["']|["'](MPIJob|mpijob-controller)["']\s*[!=]="""
    r"""|isinstance\([^)]*MPIPlugin|\bmpi\.MPIPlugin\b"""
)
ALLOWED = {SRC / "frameworks" / "mpi.py", SRC / "frameworks" / "registry.py"}


def test_no_mpi_branch_outside_the_mpi_plugin() -> None:
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        if path not in ALLOWED
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if MPI_BRANCH.search(line)
    ]
    assert not found, "MPI special cases belong in frameworks/mpi.py (override a FrameworkPlugin hook):\n" + "\n".join(
        found
    )


def test_the_pattern_finds_what_it_is_meant_to_find() -> None:
    assert MPI_BRANCH.search('if plugin.info.kind == "MPIJob":')
    assert MPI_BRANCH.search("assert isinstance(self.p, mpi.MPIPlugin)")
    assert MPI_BRANCH.search('is_mpi = labels.get("training.kubeflow.org/operator-name") == "mpijob-controller"')
    assert not MPI_BRANCH.search('kind: str = "MPIJob"')
