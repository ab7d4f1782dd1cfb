"""The METRIC line convention, parsed as the cockpit parses replica logs — including the example
training code's own output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from airflow_provider_training.ui import metrics

DAGS = Path(__file__).resolve().parents[2] / "dags"


def test_lines_in_the_convention_become_points_and_everything_else_is_ignored():
    lines = [
        "rank 0: epoch 1/2 loss 0.9",
        'METRIC {"step": 1, "loss": 0.9, "accuracy": 0.5}',
        '[rank0]: METRIC {"epoch": 2, "loss": 0.4, "lr": 0.01, "note": "text", "flag": true}',
        "METRIC {not json}",
        'METRIC {"loss": 0.1}',  # no step: not a point
        'METRIC {"step": 3, "loss": NaN}',  # json allows NaN; a curve cannot
        'xMETRIC {"step": 4, "loss": 0.2}',
    ]
    points = metrics.parse(lines)
    assert points == [
        {"step": 1.0, "loss": 0.9, "accuracy": 0.5},
        {"epoch": 2.0, "loss": 0.4, "lr": 0.01, "step": 2.0},
        {"step": 3.0},
    ]
    assert metrics.names(points) == ["loss", "accuracy", "lr"]


def test_the_example_training_code_reports_one_point_per_epoch(tmp_path):
    out = subprocess.run(
        [sys.executable, "code/train.py", "--epochs", "3", "--output", str(tmp_path)],
        cwd=DAGS,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    points = metrics.parse(out.splitlines())
    assert [p["step"] for p in points] == [1.0, 2.0, 3.0]
    assert points[-1]["loss"] < points[0]["loss"] and 0.5 < points[-1]["accuracy"] <= 1.0
