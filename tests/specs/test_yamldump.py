"""``specs.yamldump.safe_dump_all`` writes exactly what ``yaml.safe_dump_all(..., sort_keys=False)``
writes, whether it writes the document itself (plain scalars), goes through libyaml (printable-ASCII
documents) or falls back to PyYAML."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_training.specs import yamldump

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
# Strings YAML treats specially (quoted, resolved to other types, indicators), and long ones that
# the emitter folds at its line width.
TRICKY = ["true", "no", "null", "~", "1", "0x1f", "1e3", "-", "---", "...", "<<", "=", "- a", "? x", "a: b", "#c",
          "a #b", "&a", "*a", "!t", "%x", "@x", "`x", "|", ">", "'", '"', "{}", "[]", " lead", "trail ", "1:20",
          "2024-01-01", ".inf", "a  b", "x" * 79 + " y", "word " * 30]  # fmt: skip
printable = st.one_of(
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=120), st.sampled_from(TRICKY)
)
anything = st.one_of(st.text(max_size=60), printable)
# Words of the characters plain scalars are made of, and their edge cases: what the module writes
# itself when every string of a document is plain.
WORDY = ["-c", "--epochs=3", "python:3.11", "a:b", "a:", ":a", "-", "--", "-1", "+1", ".5", "1_000", "0o17", "=", "<<",
         "yes", "Off", "NULL", "2024-01-01", "1:20", "a b", "a,b", ",a", "@a", "a@b", "_x", "./x", "x" * 130]  # fmt: skip
wordy = st.one_of(st.text(alphabet="ab09_./:=+@,- ", min_size=1, max_size=90), st.sampled_from(WORDY))


def documents(strings: st.SearchStrategy[str]) -> st.SearchStrategy[list[Any]]:
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), strings, st.just({}), st.just([])
    )
    values = st.recursive(
        scalars,
        lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(strings, children, max_size=5)),
        max_leaves=25,
    )
    return st.lists(st.dictionaries(strings, values, max_size=5), min_size=1, max_size=3)


def same(docs: list[Any]) -> None:
    assert yamldump.safe_dump_all(docs) == yaml.safe_dump_all(docs, sort_keys=False)


@pytest.mark.generated
@SETTINGS
@given(documents(printable))
def test_printable_ascii_documents_are_byte_identical(docs: list[Any]) -> None:
    same(docs)


@pytest.mark.generated
@SETTINGS
@given(documents(anything))
def test_any_document_is_byte_identical(docs: list[Any]) -> None:
    same(docs)


@pytest.mark.generated
@SETTINGS
@given(documents(wordy))
def test_documents_of_plain_words_are_byte_identical(docs: list[Any]) -> None:
    same(docs)


def test_a_migrated_job_is_written_here_and_the_line_width_is_pyyaml_s() -> None:
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "job-0-torch-distributed", "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"containers": [
                {"name": "node", "image": "pytorch/pytorch:2.13.0", "command": ["python", "-c", "pass"]}
            ], "restartPolicy": "Never", "volumes": []}}}]}},
        },
    }  # fmt: skip
    trainjob = {"kind": "TrainJob", "spec": {"trainer": {"numNodes": 3, "env": [{"name": "A", "value": "b c"}]}}}
    assert yamldump._written([runtime, trainjob]) is not None
    same([runtime, trainjob])
    for column in (79, 80, 81, 82):  # a space at the line width and past it
        value = "w" * (column - len("key: ")) + " w"
        same([{"key": value}, {"list": ["w" + value]}, {"a": {"b": [{"c": value[4:]}]}}])
        assert yamldump._written([{"key": value}]) is not None if column <= 80 else True
    same([{word: word for word in WORDY}, {"words": WORDY}])
    same([{"deep": [[[[["x"]]]]], "many": {f"k{i}": [i, None, True] for i in range(3000)}}])


def test_what_libyaml_writes_differently_goes_through_pyyaml() -> None:
    folded = {"a": "x" * 70 + "\t" + "y" * 40}  # escapes counted differently when folding
    empty_key = {"": {"": None}}
    unicode = {"name": "é" * 90 + " z"}
    for docs in ([folded], [empty_key], [unicode]):
        assert not all(yamldump._plain(doc, 0) for doc in docs)
        same(docs)
    shared = {"x": "y"}
    same([{"a": shared, "b": shared}])  # anchors and aliases


def test_oversized_and_deep_documents() -> None:
    big = {"data": {f"key-{i}": "v" * (i % 200) for i in range(5_000)}}
    assert yamldump._plain(big, 0)
    same([big])
    deep: Any = "leaf"
    for _ in range(150):
        deep = {"d": [deep]}
    assert not yamldump._plain(deep, 0)  # past the depth bound: PyYAML decides
    same([deep])
