"""The shared vocabulary: ObjectRef's dict form, the str-valued action enums, the one resource table."""

from __future__ import annotations

import json

import pytest

from airflow_provider_training.client import JobDeleted, ObjectRef, resource_for
from airflow_provider_training.embedded.resources import BY_KIND
from airflow_provider_training.specs.actions import IfJobExists, OnFinishAction, OnKillAction, RolloutAction


def test_object_ref_round_trips_through_json_and_reads_api_objects() -> None:
    ref = ObjectRef("PyTorchJob", "ml", "mnist", "u-1")
    assert ObjectRef.from_dict(json.loads(json.dumps(ref.to_dict()))) == ref
    obj = {"kind": "PyTorchJob", "metadata": {"name": "mnist", "namespace": "ml", "uid": "u-1"}}
    assert ObjectRef.of(obj) == ref and str(ref) == "PyTorchJob ml/mnist"
    assert ref.same_object(obj) and not ref.same_object({**obj, "metadata": {**obj["metadata"], "uid": "u-2"}})
    assert JobDeleted("PyTorchJob", "ml", "mnist").ref == ObjectRef("PyTorchJob", "ml", "mnist")
    with pytest.raises(ValueError, match="needs namespace"):
        ObjectRef.from_dict({"kind": "PyTorchJob", "name": "mnist"})


def test_actions_are_the_strings_users_write() -> None:
    assert "delete_succeeded" in tuple(OnFinishAction) and OnFinishAction("keep") is OnFinishAction.KEEP
    assert ", ".join(OnKillAction) == "delete, keep"
    assert [str(p) for p in IfJobExists] == ["reattach", "rename", "replace", "fail"]
    assert RolloutAction.ROLLBACK == "rollback"
    with pytest.raises(ValueError):
        OnFinishAction("remove")


def test_the_client_and_the_api_server_share_one_resource_table() -> None:
    for kind in ("PyTorchJob", "MPIJob", "Job", "InferenceService"):
        assert resource_for(kind) is BY_KIND[kind]
    assert resource_for("TFJob").path("ml", "t") == "/apis/kubeflow.org/v1/namespaces/ml/tfjobs/t"
    assert BY_KIND["Pod"].path("ml") == "/api/v1/namespaces/ml/pods"
    with pytest.raises(ValueError, match="the client handles"):
        resource_for("Pod")


def test_no_code_tests_an_api_exception_status() -> None:
    """Callers catch the typed errors (NotFound, Conflict, BadRequest …); only ``client/errors.py``
    maps statuses to them."""
    import re
    from pathlib import Path

    import airflow_provider_training

    package = Path(airflow_provider_training.__file__).parent
    pattern = re.compile(r"\b(exc|e|err|error)\.status\s*(==|!=|>=|<=|>|<|in\b|not in\b)")
    found = [
        f"{path.relative_to(package)}:{number}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).as_posix() != "client/errors.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []
