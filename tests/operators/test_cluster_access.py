"""One way to reach a cluster: the hooks, and one ``DEFAULT`` meaning "``[training]
kubernetes_conn_id``, read when the task runs" for every operator that reaches one."""

from __future__ import annotations

import asyncio
import copy
import pickle

import pytest

from airflow_provider_training.hooks.training import (
    DEFAULT,
    AsyncTrainingHook,
    ClusterUnavailable,
    TrainingHook,
    resolve_conn_id,
)


def test_default_survives_copies_and_pickles() -> None:
    # Airflow deep-copies operators (and their template fields): the sentinel must stay the sentinel.
    assert copy.deepcopy(DEFAULT) is DEFAULT
    assert pickle.loads(pickle.dumps(DEFAULT)) is DEFAULT


def test_default_is_read_when_the_hook_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "")
    assert resolve_conn_id(DEFAULT) is None
    assert TrainingHook().embedded
    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "cluster_a")
    assert resolve_conn_id(DEFAULT) == "cluster_a"
    assert TrainingHook().kubernetes_conn_id == "cluster_a"
    assert TrainingHook(kubernetes_conn_id=None).embedded  # None: the embedded control plane, as documented


@pytest.mark.parametrize(
    ("module", "cls", "kwargs"),
    [
        ("airflow_provider_training.operators.deploy", "InferenceServiceOperator", {"name": "m"}),
        ("airflow_provider_training.operators.modelkit", "ModelKitPackAndPushOperator", {"reference": "r/a/b:1"}),
    ],
)
@pytest.mark.parametrize("given", [{}, {"kubernetes_conn_id": None}])
def test_operators_read_the_configured_connection_at_run_time_not_at_parse_time(
    monkeypatch: pytest.MonkeyPatch, module: str, cls: str, kwargs: dict, given: dict
) -> None:
    import importlib

    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "")  # when the DAG file is parsed
    op = getattr(importlib.import_module(module), cls)(task_id="t", **kwargs, **given)
    monkeypatch.setenv("AIRFLOW__TRAINING__KUBERNETES_CONN_ID", "cluster_b")  # when the task runs
    assert op.hook().kubernetes_conn_id == "cluster_b"


def test_an_empty_connection_id_is_the_embedded_control_plane() -> None:
    from airflow_provider_training.operators.deploy import InferenceServiceOperator

    assert InferenceServiceOperator(task_id="t", name="m", kubernetes_conn_id="").hook().embedded


def test_the_lookup_only_hook_never_starts_the_embedded_control_plane(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    monkeypatch.setenv("AIRFLOW__TRAINING__EMBEDDED_HOME", str(tmp_path / "nothing-runs-here"))

    async def open_it() -> None:
        async with AsyncTrainingHook(kubernetes_conn_id=None, lookup_only=True).get_client():
            raise AssertionError("a client for a control plane that does not run")

    with pytest.raises(ClusterUnavailable, match="not running; start it with `airflow-training embedded start`"):
        asyncio.run(open_it())
    assert not (tmp_path / "nothing-runs-here").exists() or not any((tmp_path / "nothing-runs-here").iterdir())
