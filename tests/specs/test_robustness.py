"""Property-based robustness: whatever a user (or a template) hands the loader, it returns a job or
raises JobSpecError, and validate() returns reports; no other exception escapes."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_training.specs import JobSpecError, TrainingJob, load_jobs
from airflow_provider_training.specs.kinds import KINDS
from airflow_provider_training.validation import validate
from tests.factories import minimal

SETTINGS = settings(max_examples=800, deadline=None, suppress_health_check=list(HealthCheck))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["", "Master", "Worker", "OnFailure", "ExitCode", "pytorch", "kubeflow.org/v1", "$(RANK)", "8Gi"]),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=12), st.integers()), children, max_size=4),
    ),
    max_leaves=25,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _check(source: Any) -> None:
    try:
        jobs = load_jobs(source)
    except JobSpecError as exc:
        assert exc.issues, "a JobSpecError must say what is wrong"
    else:
        assert all(isinstance(job, TrainingJob) for job in jobs)
        for job in jobs:
            job.to_dict()
    reports = validate(source)
    for report in reports:
        report.lines()


@pytest.mark.generated
@SETTINGS
@given(kind=st.sampled_from(sorted(KINDS)), data=st.data())
def test_mutated_jobs(kind: str, data: st.DataObject) -> None:
    doc = minimal(kind)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        paths = [p for p in _paths(doc) if p]
        path = data.draw(st.sampled_from(paths))
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(values)
        if not paths:
            break
    _check(copy.deepcopy(doc))


@pytest.mark.generated
@SETTINGS
@given(doc=values)
def test_random_documents(doc: Any) -> None:
    if isinstance(doc, dict):
        doc = {str(k): v for k, v in doc.items()}
        doc.setdefault("apiVersion", "kubeflow.org/v1")
        doc.setdefault("kind", "PyTorchJob")
        _check(doc)
    try:
        text = yaml.safe_dump(doc)
    except yaml.YAMLError:
        return
    _check(text)


@SETTINGS
@given(text=st.text(max_size=200))
def test_random_text(text: str) -> None:
    if not text.strip().endswith((".yaml", ".yml", ".json")):
        _check(text)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(depth=st.integers(min_value=50, max_value=400), width=st.integers(min_value=2, max_value=12))
def test_deep_nesting_and_aliases(depth: int, width: int) -> None:
    nested = "x: " + "[" * depth + "]" * depth
    _check("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\n" + nested + "\n")
    lines = ["a0: &a0 [1, 2]"]
    for i in range(1, width):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    _check("\n".join(lines) + "\nkind: TFJob\n")


def test_huge_numbers_are_reported_not_crashed() -> None:
    doc = minimal("PyTorchJob")
    doc["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2**80
    doc["spec"]["runPolicy"] = {"activeDeadlineSeconds": math.inf}
    [report] = validate(doc)
    paths = [e.path for e in report.errors]
    assert paths == ["spec.pytorchReplicaSpecs[Worker].replicas", "spec.runPolicy.activeDeadlineSeconds"]
