"""Where the tests find the project's shared reference data (``../shared`` beside the checkout)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AIRFLOW_TRAINING_SHARED", ROOT.parent / "shared"))
SEED = SHARED / "examples" / "seed"
KITOPS_TESTDATA = Path(os.environ.get("KITOPS_TESTDATA", SHARED / "testdata" / "kitops"))
