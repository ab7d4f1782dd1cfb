"""The trigger form as a person meets it, in Chromium against the session's Airflow deployment:
Airflow's home page shows no plugin import error, every shipped DAG's form can be submitted as it
opens (Trigger enabled, no field in red), and ``train_package_deploy`` started from its form with
only Epochs changed runs end to end."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.paths import ROOT
from tests.ui.browser import browser
from tests.ui.test_cockpit import DOCS_IMG

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
SHIPPED = sorted(p.stem for p in (ROOT / "dags").glob("*.py"))


def open_form(page: Any, deployment: Any, dag_id: str) -> Any:
    page.goto(f"{deployment.base_url}/dags/{dag_id}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text(f"Trigger Dag - {dag_id}", timeout=30_000)
    expect(dialog.get_by_role("button", name="Trigger", exact=True)).to_be_visible(timeout=30_000)
    page.wait_for_timeout(1000)  # the form validates its params once they are rendered
    return dialog


def test_the_home_page_shows_no_plugin_import_error(cockpit: Any, artifacts: Path) -> None:
    with browser(cockpit) as context:
        page = context.new_page()
        page.goto(f"{cockpit.base_url}/")
        expect(page.get_by_text("Active Dags")).to_be_visible(timeout=60_000)
        page.wait_for_timeout(1000)  # the stats fill in after the page
        page.screenshot(path=str(artifacts / "home.png"))
        assert "Plugin Import Error" not in page.inner_text("body")
    assert cockpit.api("GET", "/api/v2/plugins/importErrors").json()["total_entries"] == 0
    for name in ("api-server", "scheduler", "dag-processor", "triggerer"):
        assert "already registered" not in cockpit.log(name), name


def test_every_shipped_dags_form_can_be_submitted_as_it_opens(cockpit: Any) -> None:
    assert len(SHIPPED) >= 9 and "train_package_deploy" in SHIPPED
    cockpit.wait_for_dags(*SHIPPED)
    refused = {}
    with browser(cockpit) as context:
        page = context.new_page()
        for dag_id in SHIPPED:
            dialog = open_form(page, cockpit, dag_id)
            trigger = dialog.get_by_role("button", name="Trigger", exact=True)
            try:
                expect(trigger).to_be_enabled(timeout=5_000)
            except AssertionError:
                refused[dag_id] = dialog.inner_text()[:2000]
            page.keyboard.press("Escape")
            expect(dialog).to_be_hidden(timeout=10_000)
    assert refused == {}, refused


def test_train_package_deploy_started_from_its_form_succeeds(cockpit: Any) -> None:
    dag_id = "train_package_deploy"
    cockpit.wait_for_dags(dag_id)
    before = {r["dag_run_id"] for r in cockpit.api("GET", f"/api/v2/dags/{dag_id}/dagRuns").json()["dag_runs"]}
    with browser(cockpit) as context:
        page = context.new_page()
        dialog = open_form(page, cockpit, dag_id)
        epochs = dialog.get_by_role("spinbutton").first
        expect(epochs).to_have_value("10")  # the first number field is Epochs, at its default
        epochs.fill("2")
        dialog.screenshot(path=str(DOCS_IMG / "trigger-form.png"))
        dialog.get_by_role("button", name="Trigger", exact=True).click()
        expect(dialog).to_be_hidden(timeout=30_000)
    runs = cockpit.api("GET", f"/api/v2/dags/{dag_id}/dagRuns").json()["dag_runs"]
    [run] = [r for r in runs if r["dag_run_id"] not in before]
    assert run["conf"].get("epochs") == 2 and run["conf"].get("signing_conn_id") is None, run["conf"]
    assert re.match(r"^manual__", run["dag_run_id"]), run
    done = cockpit.wait_run(dag_id, run["dag_run_id"], timeout=600)
    assert done["state"] == "success", cockpit.failure_details(dag_id, run["dag_run_id"])
    states = cockpit.task_states(dag_id, run["dag_run_id"])
    assert states == {
        "train": "success",
        "package": "success",
        "approve": "success",
        "deploy": "success",
        "smoke_test": "success",
    }, states
