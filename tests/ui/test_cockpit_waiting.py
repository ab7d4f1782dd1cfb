"""The cockpit as a person meets it early and late, in the session's Airflow deployment through
Chromium: a "Training job" tab opened before the job exists waits (no red) and shows the job live
when it comes; a finished replica's whole log stays reachable; tasks without a job or ModelKit get a
neutral hint; the tab opened from the extra link is marked active; the replicas survive a re-mount;
a TrainJob's trainerStatus progress shows live. DAGs: tests/deployment/dags/cockpit_waiting.py."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.ui.browser import browser, ti_url
from tests.ui.test_cockpit import DOCS_IMG, RED
from tests.waiting import wait_for

pytestmark = pytest.mark.slow
GATED, TRAINJOB = "cockpit_gated", "cockpit_trainjob"
LINES = 1200  # more than a page (1000) of the pane: the first lines are one "load earlier lines" away
NUMBERED = re.compile(rf"^line \d+ of {LINES}$")


@pytest.fixture(scope="module")
def deployment(cockpit: Any) -> Any:
    cockpit.wait_for_dags(GATED, TRAINJOB)
    cockpit.unpause(GATED)
    cockpit.unpause(TRAINJOB)
    return cockpit


class GatedRun:
    """A ``cockpit_gated`` run whose gate and end a test opens; ``finish()`` lets it all run out."""

    def __init__(self, deployment: Any, folder: Path) -> None:
        self.deployment = deployment
        self.gate, self.go = folder / "gate", folder / "go"
        self.run_id = deployment.trigger(GATED, {"gate_file": str(self.gate), "go_file": str(self.go), "lines": LINES})

    def finish(self) -> None:
        self.gate.write_text("open")
        self.go.write_text("done")
        state = self.deployment.wait_run(GATED, self.run_id, timeout=300)["state"]
        assert state == "success", self.deployment.failure_details(GATED, self.run_id)


@pytest.fixture(scope="module")
def gated(deployment: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatedRun]:
    run = GatedRun(deployment, tmp_path_factory.mktemp("gated"))
    yield run
    run.gate.write_text("open")
    run.go.write_text("done")


def color(locator: Any) -> str:
    return str(locator.evaluate("el => getComputedStyle(el).color"))


def numbered_lines(page: Any, pod: str) -> list[str]:
    text = page.inner_text(f'[data-testid="log-{pod}"]')
    return [line for line in text.splitlines() if NUMBERED.match(line)]


def load_all_earlier(page: Any) -> None:
    button = page.locator('[data-testid="load-earlier"]')
    for _ in range(10):
        if not button.count():
            return
        button.first.click()
        page.wait_for_timeout(200)
    raise AssertionError("still more earlier lines after 10 pages")


def test_a_tab_opened_before_the_job_exists_shows_it_live_and_keeps_every_log_line(gated, artifacts):
    deployment = gated.deployment
    with browser(deployment) as context:
        page = context.new_page()
        page.goto(ti_url(deployment, GATED, gated.run_id, "train", "training-job"))
        waiting = page.locator('[data-testid="waiting"]')
        expect(waiting).to_contain_text("Waiting for the training job", timeout=60_000)
        assert color(waiting) != RED
        assert not page.locator('[data-testid="error"]').count()
        page.screenshot(path=str(artifacts / "waiting.png"))
        if os.environ.get("COCKPIT_UPDATE_SCREENSHOT"):
            page.screenshot(path=str(DOCS_IMG / "cockpit-waiting.png"))

        gated.gate.write_text("open")  # now the train task runs and submits its job
        row = page.locator('[data-testid="replicas"] tbody tr')
        expect(row).to_have_count(1, timeout=180_000)  # no reload
        pod = str(row.get_attribute("data-testid")).removeprefix("replica-")
        expect(row).to_have_attribute("data-phase", "Running", timeout=60_000)
        pane = page.locator(f'[data-testid="log-{pod}"]')
        expect(pane).to_contain_text(f"line {LINES} of {LINES}", timeout=60_000)
        followed = len(numbered_lines(page, pod))

        gated.go.write_text("done")  # the replica ends; the pane turns into the finished log
        expect(page.locator('[data-testid="job-phase"]')).to_have_text("Succeeded", timeout=120_000)
        expect(page.locator(f'[data-testid="log-status-{pod}"]')).to_contain_text("replica Succeeded", timeout=60_000)
        expect(pane).to_contain_text("done")
        assert len(numbered_lines(page, pod)) >= followed  # nothing the follow showed is gone
        load_all_earlier(page)
        assert numbered_lines(page, pod) == [f"line {n} of {LINES}" for n in range(1, LINES + 1)]

        # opened again after the end: the last page, then the rest a click away
        page.reload()
        expect(pane).to_contain_text("done", timeout=60_000)
        shown = numbered_lines(page, pod)
        assert shown[-1] == f"line {LINES} of {LINES}" and len(shown) < LINES
        expect(page.locator('[data-testid="load-earlier"]')).to_be_visible()
        load_all_earlier(page)
        assert numbered_lines(page, pod) == [f"line {n} of {LINES}" for n in range(1, LINES + 1)]


def test_tasks_without_a_job_or_modelkit_show_a_neutral_hint(gated):
    deployment = gated.deployment
    gated.finish()
    with browser(deployment) as context:
        page = context.new_page()
        for task_id, route, hint in (
            ("after", "training-job", "no-job"),  # a task that runs no training job
            ("gate", "training-job", "no-job"),
            ("train", "modelkit", "no-modelkit"),  # the train task's ModelKit tab
        ):
            page.goto(ti_url(deployment, GATED, gated.run_id, task_id, route))
            message = page.locator(f'[data-testid="{hint}"]')
            expect(message).to_be_visible(timeout=60_000)
            assert "it is not a" in message.inner_text(), (task_id, route)
            assert color(message) != RED, (task_id, route)
            assert not page.locator('[data-testid="error"]').count(), (task_id, route)


def test_the_extra_link_opens_the_tab_marked_active_and_a_remount_keeps_the_replicas(gated):
    deployment = gated.deployment
    gated.finish()

    def link() -> Any:
        response = deployment.api("GET", f"/api/v2/dags/{GATED}/dagRuns/{gated.run_id}/taskInstances/train/links")
        return response.status_code == 200 and response.json()["extra_links"].get("Training job")

    url = wait_for(link, 60, "the Training job link", interval=0.5)
    with browser(deployment) as context:
        page = context.new_page()
        page.goto(url)
        rows = page.locator('[data-testid="replicas"] tbody tr')
        expect(rows).to_have_count(1, timeout=60_000)
        tab = page.locator('a[title="Training job"]')
        expect(tab).to_have_attribute("aria-current", "page")
        assert ":" in gated.run_id and gated.run_id.split("__", 1)[1] in url  # the run id as a browser writes it

        pod = str(rows.get_attribute("data-testid")).removeprefix("replica-")
        expect(page.locator(f'[data-testid="log-{pod}"]')).to_contain_text("done", timeout=60_000)
        load_all_earlier(page)

        # Airflow mounts the tab anew (here: to the Logs tab and back; it does so too when the task's
        # state changes); while the cockpit's answers are held back, the rows it last showed are still
        # there, and so is every line of the finished replica's log that was loaded
        held: list[Any] = []
        api = re.compile(r".*/training/api/dags/.*/tasks/train/job(\?.*)?$")
        page.route(api, lambda route: held.append(route))
        page.locator('a[title="Logs"]').click()
        expect(rows).to_have_count(0)
        tab.click()
        expect(rows).to_have_count(1, timeout=2_000)
        assert held, "the tab asked again (the held request proves the rows came from memory)"
        assert numbered_lines(page, pod) == [f"line {n} of {LINES}" for n in range(1, LINES + 1)]
        expect(page.locator(f'[data-testid="log-status-{pod}"]')).to_contain_text("replica Succeeded")
        page.unroute_all(behavior="ignoreErrors")  # the held requests go on (or are dropped with the page)


def report_progress(kube_api: Any, namespace: str, name: str, percent: int) -> None:
    """What Trainer's status server does for the training code: ``status.trainerStatus``."""
    from datetime import UTC, datetime

    from kubernetes import client

    status = {
        "progressPercentage": percent,
        "estimatedRemainingSeconds": 30,
        "metrics": [{"name": "loss", "value": "0.4"}],
        "lastUpdatedTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    client.CustomObjectsApi(kube_api).patch_namespaced_custom_object_status(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", name, {"status": {"trainerStatus": status}}
    )


def test_a_trainjob_tab_shows_trainer_progress_live(deployment, kube_api, tmp_path, artifacts, kubeflow_sdk_python):
    go = tmp_path / f"go-{uuid.uuid4().hex[:6]}"
    # the trainer runs the Kubeflow SDK's update_trainjob_status(42, 30, {"loss": 0.5}), unchanged
    run = deployment.trigger(TRAINJOB, {"go_file": str(go), "python": str(kubeflow_sdk_python)})
    try:
        with browser(deployment) as context:
            page = context.new_page()
            page.goto(ti_url(deployment, TRAINJOB, run, "train", "training-job"))
            header = page.locator('[data-testid="job-header"]')
            expect(header).to_contain_text("TrainJob", timeout=180_000)
            expect(page.locator('[data-testid="replicas"] tbody tr[data-phase="Running"]')).to_have_count(
                1, timeout=60_000
            )
            # Trainer v2 sets no condition while a TrainJob runs; its JobSet's active Job says it
            expect(page.locator('[data-testid="job-phase"]')).to_have_text("Running", timeout=30_000)
            name = deployment.xcom(TRAINJOB, run, "train", "job_name")
            namespace = deployment.xcom(TRAINJOB, run, "train", "job_namespace")
            progress = page.locator('[data-testid="trainer-progress"]')
            expect(progress).to_have_attribute("data-value", "42", timeout=60_000)  # live, no reload
            expect(progress).to_contain_text("42%")
            expect(page.locator('[data-testid="trainer-status"]')).to_contain_text("loss 0.5")
            expect(page.locator('[data-testid="trainer-status"]')).to_contain_text("ETA 30 s")
            report_progress(kube_api, namespace, name, 90)
            expect(progress).to_have_attribute("data-value", "90", timeout=30_000)
            page.screenshot(path=str(artifacts / "trainjob.png"), full_page=True)
            go.write_text("done")
            expect(page.locator('[data-testid="job-phase"]')).to_have_text("Succeeded", timeout=120_000)
            expect(progress).to_have_attribute("data-value", "90")  # still shown once it finished
    finally:
        go.write_text("done")
        deployment.wait_task(TRAINJOB, run, "train", {"success", "failed"}, timeout=300)
