"""Skipping the tests of a module whose optional dependency is not installed, found without
importing it: ``pytest.importorskip("torch")`` imported torch during every collection (2.3 s here),
``pytest -m unit`` included.

    pytestmark = requires("torch")
"""

from __future__ import annotations

import importlib.util

import pytest


def requires(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"needs {module} (tools/setup.sh installs it)"
    )
