"""Training history as a data scientist reads it, in the session's Airflow deployment through
Chromium: two runs of different lengths (200 and 50 steps), one whose DAG run failed after its job
succeeded; integer step ticks, one label notation per axis, a log scale for a loss from 1.7 to
3e-5, distinct colours, short run labels with the full run id on hover, final values that are not
0.0000, the DAG run's own outcome, and "% of run" lining up runs of different lengths."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.ui.browser import browser
from tests.ui.test_cockpit import DOCS_IMG
from tests.ui.test_cockpit_waiting import GATED

pytestmark = pytest.mark.slow
SUPERSCRIPT_POWER = re.compile(r"^10[⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+$")


@pytest.fixture(scope="module")
def two_runs(deployment: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("charts")
    (folder / "gate").write_text("open")
    (folder / "go").write_text("done")
    paths = {"gate_file": str(folder / "gate"), "go_file": str(folder / "go")}
    runs = {
        "long": deployment.trigger(GATED, {**paths, "steps": 200, "decades": 4.75}),  # loss 1.7 -> 3.0e-5
        "short": deployment.trigger(GATED, {**paths, "steps": 50, "decades": 2, "fail_after": True}),
    }
    assert deployment.wait_run(GATED, runs["long"], timeout=300)["state"] == "success"
    assert deployment.wait_run(GATED, runs["short"], timeout=300)["state"] == "failed"
    return runs


@pytest.fixture(scope="module")
def deployment(cockpit: Any) -> Any:
    cockpit.wait_for_dags(GATED)
    cockpit.unpause(GATED)
    return cockpit


def texts(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_text_contents()]  # SVG text has no innerText


def test_training_history_charts_and_outcomes(deployment, two_runs, artifacts):
    long_run, short_run = two_runs["long"], two_runs["short"]
    with browser(deployment) as context:
        page = context.new_page()
        page.goto(f"{deployment.base_url}/dags/{GATED}/plugin/training-history")
        chart = page.locator('[data-testid="chart-loss"]')
        series = chart.locator('[data-testid="series-loss"]')
        expect(chart.locator(f'[data-series="{long_run}/train"] [data-testid="point"]')).to_have_count(
            200, timeout=60_000
        )
        expect(chart.locator(f'[data-series="{short_run}/train"] [data-testid="point"]')).to_have_count(50)

        # integer steps, nice ticks; one notation on the y axis
        steps = texts(page, '[data-testid="chart-loss"] [data-testid="x-tick"]')
        assert steps and all(re.fullmatch(r"\d[\d,]*", s) for s in steps), steps
        assert steps[-1] == "200"
        linear = texts(page, '[data-testid="chart-loss"] [data-testid="y-tick"]')
        assert len({len(t.split(".")[-1]) if "." in t else 0 for t in linear}) == 1, linear  # same decimals
        assert not any("e" in t for t in linear), linear

        # distinct colours, short labels, the full run id on hover
        colors = [series.nth(i).get_attribute("data-color") for i in range(series.count())]
        assert len(set(colors)) == len(colors), colors
        legend = chart.locator('[data-testid="legend-item"]')
        titles = [legend.nth(i).get_attribute("title") for i in range(legend.count())]
        assert f"{long_run} · train" in titles and f"{short_run} · train" in titles
        for label in legend.all_text_contents():
            assert "__" not in label and len(label) <= 30, label

        # the loss on a log scale: labelled at the powers of ten it spans
        page.locator('[data-testid="log-loss"]').check()
        expect(chart).to_have_attribute("data-scale", "log")
        powers = texts(page, '[data-testid="chart-loss"] [data-testid="y-tick"]')
        assert powers[0] == "10⁻⁴" and powers[-1] == "10⁰" and all(SUPERSCRIPT_POWER.match(p) for p in powers), powers
        page.screenshot(path=str(artifacts / "history-charts.png"), full_page=True)
        if os.environ.get("COCKPIT_UPDATE_SCREENSHOT"):
            page.locator('[data-testid="training-history"]').screenshot(path=str(DOCS_IMG / "cockpit-charts.png"))

        # the table: final values readable at 3e-5, and each DAG run's own outcome
        long_row = page.locator(f'[data-testid="history-run"][data-run="{long_run}"]')
        short_row = page.locator(f'[data-testid="history-run"][data-run="{short_run}"]')
        assert re.fullmatch(r"3\.02\d*e-5", long_row.locator('[data-testid="final-loss"]').inner_text()), (
            long_row.inner_text()
        )
        expect(long_row.locator('[data-testid="run-outcome"] [data-state]')).to_have_attribute("data-state", "success")
        expect(short_row.locator('[data-testid="run-outcome"] [data-state]')).to_have_attribute("data-state", "failed")
        assert "Succeeded" not in short_row.locator('[data-testid="run-outcome"]').inner_text()
        assert short_row.locator('[data-testid="run-label"]').get_attribute("title") == short_run

        # "% of run": both runs span the whole axis, their last points at the same x
        page.locator('[data-testid="x-mode"] input[value="progress"]').check()
        expect(chart.locator('[data-testid="x-tick"]').last).to_have_text("100%")
        ends = {
            run: chart.locator(f'[data-series="{run}/train"] [data-testid="point"]').last.get_attribute("cx")
            for run in (long_run, short_run)
        }
        assert ends[long_run] == ends[short_run], ends
