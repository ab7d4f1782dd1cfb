"""The learning curves' axes as the shipped bundle computes them (frontend/src/scales.js, built into
ui/static/cockpit.js), run in Debian's Chromium: nice integer ticks for steps, one label notation
per axis, powers of ten on a log axis, sensible final values, short run labels.

Chromium, not Node: it is what runs the bundle for users, and CI has it already (tools/setup.sh
installs it for the browser tests); no npm install is needed to test the committed file."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.paths import ROOT
from tests.ui.browser import ARGS, CHROMIUM

BUNDLE = ROOT / "src" / "airflow_provider_training" / "ui" / "static" / "cockpit.js"  # what the plugin serves

# The bundle's React comes from Airflow's page; the pure functions tested here never call it.
HOST_STUBS = "globalThis.React = {}; globalThis.ReactDOM = {}; globalThis.ReactJSXRuntime = {};"


@pytest.fixture(scope="module")
def cockpit_js() -> Iterator[Any]:
    """``call(name, *args)``: ``AirflowTrainingCockpit[name](...args)`` in a page holding the bundle."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_context(timezone_id="UTC").new_page()
            page.set_content("<html><body></body></html>")
            page.add_script_tag(content=HOST_STUBS)
            page.add_script_tag(content=BUNDLE.read_text())

            def call(name: str, *args: Any) -> Any:
                return page.evaluate(
                    "([name, args]) => { const r = AirflowTrainingCockpit[name](...args);"
                    " return r && r.ticks ? {domain: r.domain, ticks: r.ticks, labels: r.labels} : r; }",
                    [name, list(args)],
                )

            yield call
        finally:
            browser.close()


def test_integer_steps_get_nice_integer_ticks(cockpit_js):
    axis = cockpit_js("stepAxis", 1, 200)
    assert axis["labels"] == ["50", "100", "150", "200"]  # not 50.8 / 100.5 / 150.3
    assert cockpit_js("stepAxis", 1, 3)["labels"] == ["1", "2", "3"]  # no 1.5 for a step
    assert cockpit_js("stepAxis", 1, 12)["labels"] == ["2", "4", "6", "8", "10", "12"]
    assert cockpit_js("stepAxis", 7, 7)["labels"] == ["6", "7", "8"]  # one step: still an axis
    # oversized: a billion steps read as integers with separators, still a handful of ticks
    huge = cockpit_js("stepAxis", 1, 1_000_000_000)
    assert huge["labels"][-1] == "1,000,000,000" and 3 <= len(huge["ticks"]) <= 11


def test_loss_from_1_7_to_3e_5_on_a_log_axis(cockpit_js):
    axis = cockpit_js("valueAxis", 3e-5, 1.7, {"log": True})
    assert axis["domain"] == [3e-5, 1.7]
    assert axis["ticks"] == [1e-4, 1e-3, 1e-2, 1e-1, 1]
    assert axis["labels"] == ["10⁻⁴", "10⁻³", "10⁻²", "10⁻¹", "10⁰"]
    # the same range on a linear axis: one decimal notation, no "3.0e-5" next to "0.428"
    linear = cockpit_js("valueAxis", 3e-5, 1.7)
    assert linear["labels"] == ["0.0", "0.5", "1.0", "1.5", "2.0"]
    # tiny values: exponents for every label of the axis
    assert cockpit_js("valueAxis", 1e-5, 5e-5)["labels"] == ["1e-5", "2e-5", "3e-5", "4e-5", "5e-5"]
    # a log axis spanning less than two powers of ten: d3's ticks, plain decimals
    assert cockpit_js("valueAxis", 0.2, 0.9, {"log": True})["labels"] == ["0.2", "0.4", "0.6", "0.8"]
    # hostile: values a log axis cannot show fall back to a linear one instead of NaN positions
    fallback = cockpit_js("valueAxis", -1, 1.7, {"log": True})
    assert fallback["ticks"] and all(isinstance(t, (int, float)) for t in fallback["ticks"])


def test_final_values_and_run_labels(cockpit_js):
    values = [3e-5, 0.42812, 1.7, 12345.6, 3, 0, -2.5e-7, 1.5e9, 0.999985]
    assert [cockpit_js("formatValue", v) for v in values] == [
        "3e-5",  # not "0.0000"
        "0.4281",
        "1.7",
        "12,345.6",
        "3",
        "0",
        "\u22122.5e-7",  # d3-format writes a real minus sign
        "1.5e+9",
        "0.999985",  # not "1"
    ]
    assert cockpit_js("formatValue", None) == "" and cockpit_js("formatValue", float("nan")) == ""
    runs = [
        {"run_id": "manual__2026-03-01T09:14:03.123456+00:00", "run_after": "2026-03-01T09:14:03.123456+00:00"},
        {"run_id": "scheduled__2026-03-02T00:00:00+00:00", "run_after": "2026-03-02T00:00:00+00:00"},
        {"run_id": "lr_sweep_learning_rate_0.0001_batch_64", "run_after": "2026-03-02T00:00:00+00:00"},
        {"run_id": "manual__2026-03-01T09:14:03.123456+00:00", "run_after": "2026-03-01T09:14:03.123456+00:00"},
    ]
    assert cockpit_js("runLabels", runs) == [
        "manual 03-01 09:14:03",
        "scheduled 03-02 00:00:00",
        "lr_sweep_learning…",
        "manual 03-01 09:14:03 #2",
    ]
