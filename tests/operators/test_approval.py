"""DeployApprovalOperator: its switch, and the approve/reject flow under ``dag.test()`` on the installed
Airflow (CI's Airflow-version tier runs it on 3.2 and 3.4 too; the flow in Chromium, against a
deployment: tests/ui/test_approval.py)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_training import compat
from airflow_provider_training.operators.approval import DeployApprovalOperator, ModelKit, flag
from tests.operators.helpers import dag_file


@pytest.mark.parametrize(("value", "expected"), [("True", True), ("False", False), (True, True), ("", False)])
def test_the_rendered_param_switches_the_approval(value: object, expected: bool) -> None:
    assert flag("enabled", value) is expected


def test_a_value_that_is_neither_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"enabled='maybe': use true or false"):
        flag("enabled", "maybe")


DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("uri", "written", "digest"),
    [
        (f"kit://localhost:5000/ml/mnist:v1@{DIGEST}", "localhost:5000/ml/mnist:v1", DIGEST),
        (f"ml/mnist@{DIGEST}", "ml/mnist", DIGEST),  # as written: no registry added
        ("localhost:5000/ml/mnist:v1", "localhost:5000/ml/mnist:v1", ""),
        ("kit://Not A Reference@x", "Not A Reference", "x"),  # shown, never read
    ],
)
def test_a_modelkit_is_shown_as_written_with_its_digest(uri: str, written: str, digest: str) -> None:
    modelkit = ModelKit.of(uri)
    assert (modelkit.written, modelkit.digest) == (written, digest)
    assert modelkit.reference == uri.removeprefix("kit://")


def test_a_dead_registry_is_asked_once_per_model_not_through_the_back_off() -> None:
    """The metrics are only shown: one connection per ModelKit, where the registry client's back-off
    (6 retries, ~23 s) made a person wait ~46 s for the page against a registry that is down."""
    connections = []
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def refuse() -> None:  # accept, count, hang up: every attempt fails as against a dead registry
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            connections.append(conn)
            conn.close()

    threading.Thread(target=refuse, daemon=True).start()
    try:
        approval = DeployApprovalOperator(
            task_id="approve", candidate=f"127.0.0.1:{port}/ml/mnist:v2@{DIGEST}", service_name="mnist"
        )
        text = approval.describe(f"kit://127.0.0.1:{port}/ml/mnist:v1@{DIGEST}")
    finally:
        server.close()
    assert text.count("not read (UnreachableError)") == 2, text
    assert f"| `127.0.0.1:{port}/ml/mnist:v2` | `{DIGEST}` |" in text
    assert f"| `127.0.0.1:{port}/ml/mnist:v1` | `{DIGEST}` |" in text
    assert len(connections) == 2


@pytest.fixture(scope="module")
def core_api(airflow_db: Any) -> Iterator[Any]:
    """Airflow's REST API as an api-server serves it, on the session's metadata DB; callers are admins."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "True")
        from airflow.api_fastapi.app import create_app
        from fastapi.testclient import TestClient

        yield TestClient(create_app("core"))


def answer(api: Any, dag_id: str, option: str, stop: threading.Event, seen: dict[str, Any]) -> None:
    """A person at the Required Actions page: once the run's approval request exists, answer it through
    the REST API (``PATCH .../hitlDetails``, what that page sends). Records the request in ``seen``."""
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    while not stop.wait(0.2):
        with create_session() as session:
            row = session.execute(
                select(TaskInstance.run_id, HITLDetail.subject, HITLDetail.body)
                .join(HITLDetail, HITLDetail.ti_id == TaskInstance.id)
                .where(TaskInstance.dag_id == dag_id, HITLDetail.responded_at.is_(None))
            ).first()
        if row is None:
            continue
        seen.update(subject=row.subject, body=row.body)
        response = api.patch(
            f"/api/v2/dags/{dag_id}/dagRuns/{row.run_id}/taskInstances/approve/-1/hitlDetails",
            json={"chosen_options": [option], "params_input": {}},
        )
        seen["status"] = response.status_code
        return


@pytest.mark.filterwarnings("ignore:The HMAC key is")  # Airflow's generated JWT secret, not ours
@pytest.mark.parametrize(("option", "deploy"), [("Approve", "success"), ("Reject", "skipped")])
def test_a_person_approves_or_rejects_on_this_airflow(
    run_dag: Any,
    test_namespace: str,
    registry: Any,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    capfd: Any,
    option: str,
    deploy: str,
) -> None:
    """The approval as ``dag.test()`` runs it on the installed Airflow. 3.3+: the task waits in the
    ``awaiting_input`` state, the request shows the comparison, a person's answer through the REST API
    resumes it, Reject skips the deploy and the run still succeeds. 3.2 waits in the triggerer
    (``HITLTrigger``), which ``dag.test()`` cannot answer: the task fails at once saying so, instead
    of the trigger's AttributeError."""
    dag_id = f"approval_{option.lower()}"
    # a ModelKit the registry does not have: its metric shows as not read, the person still decides
    candidate = f"kit://{registry.host}/team/digits:v2@sha256:{'a' * 64}"
    monkeypatch.setenv(
        "AIRFLOW_CONN_APPROVAL_REGISTRY",
        json.dumps({"conn_type": "modelkit_registry", "host": registry.host, "extra": {"plain_http": True}}),
    )
    stop, seen = threading.Event(), {}
    if compat.HITL_AWAITING_INPUT:
        api = request.getfixturevalue("core_api")
        threading.Thread(target=answer, args=(api, dag_id, option, stop, seen), daemon=True).start()
    try:
        run = run_dag(
            dag_file(
                dag_id,
                f"""
from airflow_provider_training.operators.approval import DeployApprovalOperator
from airflow.providers.standard.operators.empty import EmptyOperator
approve = DeployApprovalOperator(
    task_id="approve",
    candidate={candidate!r},
    service_name="digits",
    namespace={test_namespace!r},
    registry_conn_id="approval_registry",
)
approve >> EmptyOperator(task_id="deploy")
""",
            ),
            dag_id,
        )
    finally:
        stop.set()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    if not compat.HITL_AWAITING_INPUT:
        assert states == {"approve": "failed", "deploy": "upstream_failed"}
        out = "".join(capfd.readouterr())
        assert "an approval cannot be answered under dag.test() / 'airflow dags test' on Airflow 3.2" in out
        assert "'NoneType' object has no attribute" not in out and not seen
        return
    assert seen.get("status") == 200, seen
    assert seen["subject"] == f"Deploy {registry.host}/team/digits:v2 to digits?"
    assert f"nothing is deployed as `{test_namespace}/digits` yet" in seen["body"]
    assert "| candidate | not read (" in seen["body"] and f"`sha256:{'a' * 64}`" in seen["body"]
    assert run.state == "success"
    assert states == {"approve": "success", "deploy": deploy}
