"""One word for each concept: the action enums are what the operators accept and decide with, and
every XCom key the provider pushes or reads is a name of ``airflow_provider_training.xcom``."""

from __future__ import annotations

import ast

from airflow_provider_training import xcom
from airflow_provider_training.operators import identity
from airflow_provider_training.specs.actions import JobDecision, OnFinishAction, RolloutAction
from tests.paths import ROOT

SRC = ROOT / "src" / "airflow_provider_training"
XCOM_CALLS = {"xcom_push", "xcom_pull", "get_value"}


def test_the_operators_accept_the_enums_members() -> None:
    from airflow_provider_training.operators import deploy, modelkit_job

    assert tuple(RolloutAction) == deploy.ROLLOUT_ACTIONS
    assert tuple(OnFinishAction) == modelkit_job.FINISH_ACTIONS


def test_a_decision_is_a_member_of_the_enum() -> None:
    decision = identity.on_existing(None, {}, "reattach")
    assert decision.action is JobDecision.CREATE
    taken = {"kind": "PyTorchJob", "metadata": {"name": "a", "namespace": "n", "labels": {}}, "status": {}}
    assert identity.on_existing(taken, {identity.DAG_ID: "another"}, "fail").action is JobDecision.FAIL


def test_xcom_keys_are_named_in_one_module() -> None:
    literal = []
    for path in sorted(SRC.rglob("*.py")):
        if "embedded" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in XCOM_CALLS:
                continue
            for kw in node.keywords:
                if kw.arg == "key" and isinstance(kw.value, ast.Constant):
                    literal.append(f"{path.relative_to(SRC)}:{node.lineno} key={kw.value.value!r}")
    assert literal == [], "XCom keys written as strings (use airflow_provider_training.xcom): " + ", ".join(literal)
    assert xcom.JOB_REF == ("job_kind", "job_name", "job_namespace", "job_uid")  # what earlier versions wrote
