"""The operators that wait for a cluster object share the training operator's skeleton: ``execute``
submits and hands over to ``execute_sync`` (wait here) or ``execute_async`` (defer), a deferral
resumes in ``trigger_reentry``, ``cleanup`` applies the end action; every attribute is first set
in ``__init__`` (Airflow copies operators, a later-born attribute is missing on the copy)."""

from __future__ import annotations

import ast
import inspect
import typing

import pytest

from tests.paths import ROOT

OPERATORS = ROOT / "src" / "airflow_provider_training" / "operators"


def test_the_deploy_operator_has_the_training_operators_shape() -> None:
    from airflow_provider_training.operators.deploy import InferenceServiceOperator
    from airflow_provider_training.operators.training import TrainingJobOperator

    for method in ("execute", "execute_sync", "execute_async", "trigger_reentry", "execute_complete"):
        assert callable(getattr(TrainingJobOperator, method))
        assert callable(getattr(InferenceServiceOperator, method)), method
    assert callable(InferenceServiceOperator.cleanup)
    hints = typing.get_type_hints(InferenceServiceOperator._fail)
    assert hints["return"] is typing.NoReturn
    assert typing.get_type_hints(InferenceServiceOperator.execute_async)["return"] is typing.NoReturn
    assert "AssertionError" not in inspect.getsource(InferenceServiceOperator)


def test_the_packaging_job_runner_submits_waits_finishes_and_cleans_up() -> None:
    from airflow_provider_training.operators.modelkit_job import PackagingJobRunner

    for method in ("submit", "execute_sync", "finish", "cleanup", "run"):
        assert callable(getattr(PackagingJobRunner, method)), method


def _assigned(function: ast.FunctionDef) -> set[str]:
    return {
        target.attr
        for node in ast.walk(function)
        for target in (node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)])
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
        and isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }


@pytest.mark.parametrize("module", ["deploy.py", "modelkit.py", "modelkit_job.py", "training.py", "trainjob.py"])
def test_no_attribute_is_first_set_outside_init(module: str) -> None:
    tree = ast.parse((OPERATORS / module).read_text())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    late = []
    for cls in classes.values():
        chain, born = [cls], set()
        while chain:  # the class and its bases in this module
            current = chain.pop()
            for item in current.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    born |= _assigned(item)
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):  # class attributes
                    born |= {
                        t.id
                        for t in getattr(item, "targets", [getattr(item, "target", None)])
                        if isinstance(t, ast.Name)
                    }
            chain += [classes[b.id] for b in current.bases if isinstance(b, ast.Name) and b.id in classes]
        for item in cls.body:
            if isinstance(item, ast.FunctionDef) and item.name != "__init__":
                late += [f"{cls.name}.{item.name}: self.{name}" for name in sorted(_assigned(item) - born)]
    assert late == [], f"attributes first set outside __init__ in operators/{module}: {late}"


@pytest.mark.parametrize("module", ["deploy.py", "modelkit.py", "modelkit_job.py", "training.py", "trainjob.py"])
def test_operators_ask_the_client_not_the_raw_api(module: str) -> None:
    # client.core / client.custom are the official client's APIs: a call there skips the typed errors
    # and the operations both clients share (client/operations.py).
    source = (OPERATORS / module).read_text()
    assert ".core." not in source and ".custom." not in source, module
