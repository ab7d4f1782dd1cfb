"""Where the tests find their reference data: ``tests/data/`` inside the checkout (see its README).

Nothing outside the repository is read, so a plain ``git clone`` runs every test.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SEED = DATA / "seed"
KITOPS_TESTDATA = DATA / "kitops"
DAGS = ROOT / "dags"
