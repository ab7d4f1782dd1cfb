"""DeployApprovalOperator's switch and request text, without a deployment (the approve/reject flow
itself runs in Chromium: tests/ui/test_approval.py)."""

from __future__ import annotations

import socket
import threading

import pytest

from airflow_provider_training.operators.approval import DeployApprovalOperator, ModelKit, flag


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
