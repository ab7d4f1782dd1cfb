"""The training cockpit in a real Airflow deployment, through a real browser: a 2-replica job seen
live (replicas, phases, a worker's log line, learning curves), the ModelKit tab against the registry,
a failed job's failed replica, per-DAG access, and no watch left open once the page is gone."""

from __future__ import annotations

import json
import os
import urllib.request
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psutil
import pytest
from playwright.sync_api import expect

from tests.ui.browser import browser, ti_url
from tests.ui.conftest import DAG_ID
from tests.waiting import wait_for

pytestmark = pytest.mark.slow
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
RED = "rgb(220, 38, 38)"
TASK_START = 300.0  # generous: on a loaded 2-core machine a task may take a minute to start


def job_api(cockpit: Any, run_id: str, task_id: str = "train", suffix: str = "", user: str | None = "admin"):
    """``(status, body)`` of a cockpit route as ``user`` (``None``: no credentials)."""
    headers = {"Authorization": f"Bearer {cockpit.user_tokens[user]}"} if user else {}
    response = httpx.get(
        f"{cockpit.base_url}/training/api/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/{task_id}/job{suffix}",
        headers=headers,
        timeout=60,
    )
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, response.text


def cluster_connections(cockpit: Any, api_port: int) -> int:
    """Open TCP connections from the api-server (and its workers) to the cluster's API server: its
    watches and log follows."""
    server = psutil.Process(cockpit.pids["api-server"])
    count = 0
    for proc in [server, *server.children(recursive=True)]:
        try:
            conns = proc.net_connections(kind="tcp")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        count += sum(1 for c in conns if c.raddr and c.raddr.port == api_port and c.status == psutil.CONN_ESTABLISHED)
    return count


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("model")
    (out / "model.bin").write_bytes(b"\x00weights" * 100)
    (out / "metrics.json").write_text(json.dumps({"accuracy": 0.93, "loss": 0.21}))
    (out / "Kitfile").write_text(
        'manifestVersion: "1.0"\npackage:\n  name: cockpit-model\nmodel:\n  name: cockpit-model\n  path: model.bin\n'
        "docs:\n  - path: metrics.json\n    description: metrics\n"
    )
    return out


def test_api_needs_an_airflow_user_with_access_to_the_dag(cockpit, tmp_path, control_plane):
    go = tmp_path / "go"
    run = cockpit.trigger(DAG_ID, {"go_file": str(go), "reference": ""})
    try:
        status, body = wait_for(
            lambda: (r := job_api(cockpit, run))[0] == 200 and r, TASK_START, "the job", interval=0.5
        )
        assert body["job"]["kind"] == "PyTorchJob"
        assert job_api(cockpit, run, user=None)[0] == 401
        assert job_api(cockpit, run, user="outsider")[0] == 403
        assert job_api(cockpit, run, suffix="/stream", user=None)[0] == 401
        assert job_api(cockpit, run, user="viewer")[0] == 200
        # a pod that is not one of the job's replicas is never served, even in the same namespace
        assert job_api(cockpit, run, suffix="/logs/some-other-pod")[0] == 404
        # a task that submitted no job says so
        status, body = job_api(cockpit, run, task_id="package")
        assert status == 404 and "has not submitted a training job" in body["detail"]
        # nothing the cluster would need to authenticate reaches a response
        token = control_plane.token
        for suffix in ("", "/replicas", "/events", "/metrics", f"/logs/{body_name(cockpit, run)}-master-0"):
            status, body = job_api(cockpit, run, suffix=suffix)
            assert status == 200, (suffix, body)
            assert token not in json.dumps(body) and "BEGIN CERTIFICATE" not in json.dumps(body)
    finally:
        go.write_text("done")
        cockpit.wait_task(DAG_ID, run, "train", {"success", "failed"}, timeout=300)


def body_name(cockpit: Any, run: str) -> str:
    return job_api(cockpit, run)[1]["job"]["name"]


def registry_digest(registry_host: str, repository: str, tag: str) -> str:
    request = urllib.request.Request(
        f"http://{registry_host}/v2/{repository}/manifests/{tag}",
        method="HEAD",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.headers["Docker-Content-Digest"])


def test_training_job_tab_live_then_modelkit_tab(cockpit, registry, model_dir, artifacts, tmp_path, control_plane):
    go = tmp_path / "go"
    reference = f"{registry.host}/cockpit/model:{uuid.uuid4().hex[:8]}"
    run = cockpit.trigger(DAG_ID, {"go_file": str(go), "model_dir": str(model_dir), "reference": reference})
    api_port = int(control_plane.api_url.rsplit(":", 1)[1])

    def running() -> Any:
        status, body = job_api(cockpit, run)
        return (
            status == 200
            and len(body["replicas"]) == 2
            and all(r["phase"] == "Running" for r in body["replicas"])
            and body
        )

    job = wait_for(running, TASK_START, "both replicas running", interval=0.5)["job"]["name"]
    master, worker = f"{job}-master-0", f"{job}-worker-0"
    baseline = cluster_connections(cockpit, api_port)
    marker = f"hello-{uuid.uuid4().hex[:8]}"
    with browser(cockpit) as context:
        page = context.new_page()
        page.goto(ti_url(cockpit, DAG_ID, run, "train", "training-job"))
        page.wait_for_selector(f'[data-testid="replica-{master}"][data-phase="Running"]', timeout=60_000)
        page.wait_for_selector(f'[data-testid="replica-{worker}"][data-phase="Running"]')
        # retried like the waits above: once, in a loaded CI run, an instant count found no row just
        # after both rows were seen (the tab rendered anew in between; its cause is not known)
        expect(page.locator('[data-testid="replicas"] tbody tr')).to_have_count(2)
        page.click(f'[data-testid="show-log-{worker}"]')
        page.wait_for_function(
            f"document.querySelector('[data-testid=\"log-{worker}\"]')?.textContent.includes('rank 1 epoch 3')"
        )
        # the tab holds watches (job, pods, events) and a log follow, not polls
        open_now = wait_for(
            lambda: (n := cluster_connections(cockpit, api_port)) > baseline and n,
            TASK_START,
            "the page's watches",
            interval=0.5,
        )
        go.write_text(marker)  # worker 0 prints after the page opened, then both replicas finish
        page.wait_for_function(
            f"document.querySelector('[data-testid=\"log-{worker}\"]')?.textContent.includes('{marker}')",
            timeout=30_000,
        )
        for pod in (master, worker):
            page.wait_for_selector(f'[data-testid="replica-{pod}"][data-phase="Succeeded"]', timeout=60_000)
        page.wait_for_selector('[data-testid="job-phase"]:text("Succeeded")', timeout=60_000)
        points = page.locator('[data-testid="chart-loss"] [data-testid="point"]')
        page.wait_for_function(
            'document.querySelectorAll(\'[data-testid="chart-loss"] [data-testid="point"]\').length === 3'
        )
        expect(points).to_have_count(3)  # one point per epoch
        expect(page.locator('[data-testid="chart-accuracy"] [data-testid="point"]')).to_have_count(3)
        page.screenshot(path=str(artifacts / "training-job.png"), full_page=True)
        if os.environ.get("COCKPIT_UPDATE_SCREENSHOT"):  # README's image: refreshed on request only
            page.screenshot(path=str(DOCS_IMG / "cockpit-training-job.png"), full_page=False)
        page.close()
    # the browser is gone: every watch and follow the tab opened is closed
    wait_for(lambda: cluster_connections(cockpit, api_port) <= baseline, 30, "the watches to close", interval=0.5)
    assert open_now > baseline

    cockpit.wait_task(DAG_ID, run, "package", {"success", "failed"}, timeout=180)
    assert cockpit.task_states(DAG_ID, run)["package"] == "success", cockpit.failure_details(DAG_ID, run)
    repository, tag = reference.split("/", 1)[1].rsplit(":", 1)
    digest = registry_digest(registry.host, repository, tag)

    def link() -> Any:
        # Airflow writes extra links right after it marks the task done: wait for it
        response = cockpit.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run}/taskInstances/package/links")
        return response.status_code == 200 and response.json()["extra_links"].get("ModelKit")

    links = {"extra_links": {"ModelKit": wait_for(link, 60, "the ModelKit link", interval=0.5)}}
    assert links["extra_links"]["ModelKit"].endswith("/tasks/package/plugin/modelkit")
    with browser(cockpit, user="viewer") as context:
        page = context.new_page()
        page.goto(links["extra_links"]["ModelKit"])
        page.wait_for_selector('[data-testid="layer"]', timeout=60_000)
        assert page.inner_text('[data-testid="modelkit-digest"]') == digest
        layer_text = page.inner_text('[data-testid="modelkit-layers"]')
        assert "application/vnd.kitops.modelkit.model.v1.tar" in layer_text and "model.bin" in layer_text
        assert "cockpit-model" in page.inner_text('[data-testid="kitfile"]')
        assert '"accuracy": 0.93' in page.inner_text('[data-testid="modelkit-metrics"]')
        page.screenshot(path=str(artifacts / "modelkit.png"), full_page=True)


def test_failed_job_shows_the_failed_replica_in_red_and_history_compares_runs(cockpit, artifacts, tmp_path):
    go = tmp_path / "go"
    go.write_text("now")
    run = cockpit.trigger(DAG_ID, {"go_file": str(go), "worker_exit": 3})
    other = cockpit.trigger(DAG_ID, {"go_file": str(go), "epochs": 4})  # a second run to compare with
    assert cockpit.wait_task(DAG_ID, run, "train", {"success", "failed"}, timeout=300) == "failed"
    assert cockpit.wait_task(DAG_ID, other, "train", {"success", "failed"}, timeout=300) == "success"
    job = body_name(cockpit, run)
    worker = f"{job}-worker-0"
    with browser(cockpit) as context:
        page = context.new_page()
        page.goto(ti_url(cockpit, DAG_ID, run, "train", "training-job"))
        page.wait_for_selector('[data-testid="job-phase"]:text("Failed")', timeout=60_000)
        row = page.locator(f'[data-testid="replica-{worker}"]')
        assert row.get_attribute("data-failed") == "true"
        expect(row).to_have_css("color", RED)
        assert page.inner_text(f'[data-testid="failure-exit-{worker}"]') == "3"
        page.wait_for_function(
            f"document.querySelector('[data-testid=\"failure-log-{worker}\"]')?.textContent.includes('loss is NaN')"
        )
        log = page.locator(f'[data-testid="failure-log-{worker}"]')
        # to_have_css retries: the pane re-renders as the final log page arrives, and a node read
        # while it is swapped out has no computed colour
        expect(log).to_have_css("color", RED)
        page.screenshot(path=str(artifacts / "failed-job.png"), full_page=True)

        page.goto(f"{cockpit.base_url}/dags/{DAG_ID}/plugin/training-history")
        page.wait_for_selector('[data-testid="history-run"]', timeout=60_000)
        assert page.locator('[data-testid="history-run"]').count() >= 2
        series = page.locator('[data-testid="chart-loss"] [data-testid="series-loss"]')
        assert series.count() >= 2  # one line per run
        assert (
            page.locator(f'[data-testid="chart-loss"] [data-series="{other}/train"] [data-testid="point"]').count() == 4
        )
        page.screenshot(path=str(artifacts / "history.png"), full_page=True)

    with browser(cockpit, user="outsider") as context:
        page = context.new_page()
        page.goto(ti_url(cockpit, DAG_ID, run, "train", "training-job"))
        status = page.evaluate(
            "async (url) => (await fetch(url, {credentials: 'same-origin'})).status",
            f"{cockpit.base_url}/training/api/dags/{DAG_ID}/runs/{quote(run, safe='')}/tasks/train/job",
        )
        assert status == 403
