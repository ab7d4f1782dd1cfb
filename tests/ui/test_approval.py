"""The deploy approval as a person meets it, in Chromium against the session's Airflow deployment:
``train_package_deploy`` with ``approve_deploy`` on waits at ``approve``; its Required Actions page
shows the candidate's and the deployed model's accuracy and the ModelKit digest; Approve deploys,
Reject skips ``deploy`` and ``smoke_test`` and the run still succeeds."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.ui.browser import browser
from tests.ui.test_cockpit import DOCS_IMG

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
DAG_ID = "train_package_deploy"


def decide(cockpit: Any, run_id: str, option: str, screenshot: str | None = None) -> str:
    """Answer the run's approval from its Required Actions page; returns the request's text."""
    cockpit.wait_parked(DAG_ID, run_id, "approve", "awaiting_input", timeout=600)  # see wait_parked: the race
    digest = cockpit.xcom(DAG_ID, run_id, "package", "digest")
    with browser(cockpit) as context:
        page = context.new_page()
        page.goto(f"{cockpit.base_url}/dags/{DAG_ID}/runs/{run_id}/tasks/approve/required_actions")
        expect(page.get_by_text("Serve the candidate ModelKit", exact=False).first).to_be_visible(timeout=60_000)
        expect(page.get_by_text(digest).first).to_be_visible(timeout=30_000)
        text = page.inner_text("body")
        if screenshot:
            page.screenshot(path=str(DOCS_IMG / screenshot), full_page=True)
        page.get_by_role("button", name=option, exact=True).click()
        expect(page.get_by_role("button", name=option, exact=True)).to_be_disabled(timeout=30_000)  # answered
    return text


def states(after_approve: str) -> dict[str, str]:
    """The run's task states: everything up to ``approve`` succeeded; ``deploy`` and ``smoke_test`` as the answer made them."""
    return {"train": "success", "package": "success", "approve": "success", "deploy": after_approve,
            "smoke_test": after_approve}  # fmt: skip


def test_approve_deploys_and_reject_skips_the_deploy(cockpit: Any) -> None:
    cockpit.wait_for_dags(DAG_ID)
    cockpit.unpause(DAG_ID)
    approved = cockpit.trigger(DAG_ID, {"epochs": 1, "approve_deploy": True})
    text = decide(cockpit, approved, "Approve")
    assert re.search(r"candidate\s+0\.\d+", text), text  # its accuracy, from the pushed metrics.json
    done = cockpit.wait_run(DAG_ID, approved, timeout=600)
    assert done["state"] == "success", cockpit.failure_details(DAG_ID, approved)
    assert cockpit.task_states(DAG_ID, approved) == states(after_approve="success")
    served = cockpit.xcom(DAG_ID, approved, "deploy")["storage_uri"]

    rejected = cockpit.trigger(DAG_ID, {"epochs": 1, "approve_deploy": True})
    text = decide(cockpit, rejected, "Reject", screenshot="deploy-approval.png")
    # the model serving now (the approved run's) is shown beside the candidate, with its accuracy
    assert re.search(r"deployed now\s+0\.\d+", text), text
    assert served.removeprefix("kit://").partition("@")[2] in text
    done = cockpit.wait_run(DAG_ID, rejected, timeout=600)
    assert done["state"] == "success", cockpit.failure_details(DAG_ID, rejected)
    assert cockpit.task_states(DAG_ID, rejected) == states(after_approve="skipped")
