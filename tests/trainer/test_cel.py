"""The CRDs' CEL rules as the checks evaluate them (transpiled where the rule has no macro, a cached
activation, results remembered by value) agree with cel-python's own interpreter run the plain way,
on every rule of the vendored Trainer and JobSet CRDs, for well-formed, malformed and hostile values."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from celpy import celparser
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_training.specs.trainer import schema
from airflow_provider_training.specs.trainer.crds import all_crds


def _rules() -> list[str]:
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            found.update(rule["rule"] for rule in node.get("x-kubernetes-validations", []))
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(all_crds())
    return sorted(found)


RULES = _rules()
# Rules of other shapes, for what the checks take from a rule's text: the fields it reads (a rule is
# evaluated on those alone). Methods, macros, indexes, spaces, whole values and oldSelf.
SHAPES = [
    "self.metadata.name.size() == 5",
    "self . metadata . name . size ( ) == 5",
    "self.metadata.size() == 1",
    "size(self) == 2",
    "self['metadata'] == oldSelf.metadata",
    "has(self.metadata.name) && self.metadata.namespace == self.metadata.name",
    "self.metadata.exists(k, k == 'namespace')",
    "self.replicatedJobs[0].name == 'a'",
    "oldSelf.metadata.name == self.metadata.name",
    "self.x == self",
]


def _reference_programs() -> dict[str, Any]:
    """Each rule compiled by a fresh ``celpy.Environment()`` with the library's default parser and
    runner (the interpreter), as ``schema`` evaluated them before it was made fast."""
    kept = celparser.CELParser.CEL_PARSER
    celparser.CELParser.CEL_PARSER = None
    try:
        env = celpy.Environment()
        return {rule: env.program(env.compile(rule)) for rule in RULES + SHAPES}
    finally:
        celparser.CELParser.CEL_PARSER = kept


REFERENCE = _reference_programs()


def reference(rule: str, value: Any, old: Any) -> bool | None:
    activation = {"self": celpy.json_to_cel(value)}
    if old is not None:
        activation["oldSelf"] = celpy.json_to_cel(old)
    try:
        result = REFERENCE[rule].evaluate(activation)
    except Exception:
        return None
    return None if isinstance(result, celpy.CELEvalError) else bool(result)


def fast(rule: str, value: Any, old: Any) -> bool | None:
    return schema._evaluate(rule, value, old, {})


# The names the rules read, so that generated objects reach past the first member access.
FIELDS = ["metadata", "name", "namespace", "torch", "mpi", "jax", "xgboost", "flux", "numNodes", "startupPolicy",
          "startupPolicyOrder", "replicatedJobs", "dependsOn", "templates", "lastUpdatedTime", "status", "x"]  # fmt: skip
STRINGS = ["", "node", "InOrder", "AnyOrder", "a", "job-1", "Job_1", "-a", "a-", "a" * 63, "a" * 64, "a" * 300,
           "trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue", "s3://bucket/x", "hf://org/m",
           "://x", "1abc", "é", "\x00", "a\nb"]  # fmt: skip
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),  # the schema check refuses what int64 cannot hold
    st.floats(allow_nan=False),
    st.sampled_from(STRINGS),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(FIELDS), children, max_size=5),
    ),
    max_leaves=20,
)


def test_every_vendored_rule_is_covered() -> None:
    assert len(RULES) >= 10, RULES
    assert any(schema._MACRO.search(rule) for rule in RULES) and not all(schema._MACRO.search(r) for r in RULES)


@pytest.mark.parametrize("rule", RULES + SHAPES)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=values, old=st.one_of(st.none(), values))
def test_rules_agree_with_the_interpreter(rule: str, value: Any, old: Any) -> None:
    assert fast(rule, value, old) == reference(rule, value, old)
    assert fast(rule, value, old) == reference(rule, value, old)  # remembered: the same answer again


@pytest.mark.parametrize("rule", RULES + SHAPES)
def test_shapes_the_checks_meet(rule: str) -> None:
    """Hand-picked values: each rule passing, failing and not applying (a field it reads is absent)."""
    jobs = [{"name": "a"}, {"name": "b", "dependsOn": [{"name": "a", "status": "Complete"}]}]
    cases: list[Any] = [
        {"metadata": {"name": "job-1"}},
        {"metadata": {"name": "Job_1"}},
        {"metadata": {"name": "a" * 64}},
        {"metadata": {}},
        {"metadata": {"name": 5}},
        {"torch": {}, "mpi": {}},
        {"torch": {}},
        {"startupPolicy": {"startupPolicyOrder": "InOrder"}, "replicatedJobs": jobs},
        {"startupPolicy": {"startupPolicyOrder": "AnyOrder"}, "replicatedJobs": jobs},
        {"replicatedJobs": jobs[:1]},
        {"templates": [{"metadata": {"namespace": "x"}}, {"metadata": {}}]},
        ["node", "other"],
        ["other"],
        "kueue.x-k8s.io/multikueue",
        "elsewhere",
        "s3://bucket/model",
        "not a uri",
        "",
        0,
        3,
        {},
        [],
    ]
    for value in cases:
        for old in (None, value, "changed"):
            assert fast(rule, value, old) == reference(rule, value, old), (value, old)
