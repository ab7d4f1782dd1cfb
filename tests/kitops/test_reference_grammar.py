"""One ModelKit reference grammar: a Kitfile's ``model.path`` is a reference (``kitops.md`` §1.5)
exactly when kitops can parse it (§3.3), and no reference makes the parser hang."""

from __future__ import annotations

import pytest

from airflow_provider_training.kitops.reference import ReferenceError, parse
from airflow_provider_training.specs.kitfile import Kitfile

DIGEST = "sha256:" + "a" * 64


def _model_reference(path: str) -> str | None:
    return Kitfile.from_yaml(f"manifestVersion: 1.0.0\nmodel:\n  path: '{path}'\n").model_reference()


@pytest.mark.parametrize(
    "path",
    ["models:v2", "reg.io/ns/base:v1", "localhost:5000/a/b:v1", f"reg.io/ns/m@{DIGEST}", DIGEST, "a:b,v2"],
)
def test_a_reference_kitops_parses_is_a_reference_in_the_kitfile(path: str) -> None:
    parse(path)
    assert _model_reference(path) == path


# what the Kitfile's own copy of the grammar took for references, though kitops refused to pull them
@pytest.mark.parametrize(
    "path", ["m@sha256:abc", f"m@sha512:{'a' * 128}", "my_reg.io/x:1", "a:b,c d", "reg.io:99999999/a:b", "A:b"]
)
def test_what_kitops_refuses_is_a_local_path_in_the_kitfile(path: str) -> None:
    with pytest.raises(ReferenceError):
        parse(path)
    assert _model_reference(path) is None


def test_hostile_repository_names_are_refused_without_backtracking() -> None:
    # exponential in Python's matcher with oras' regex as written ("a" * 30 + "A" took minutes)
    hostile = "reg.io/" + "a" * 5000 + "A:v1"
    with pytest.raises(ReferenceError, match="invalid repository"):
        parse(hostile)
    assert _model_reference(hostile) is None


def test_oversized_reference_parses() -> None:
    repository = "/".join(["team-" + "a" * 60] * 40)
    ref = parse(f"reg.io/{repository}:v1,v2")
    assert (ref.repository, ref.tag, ref.extra_tags) == (repository, "v1", ("v2",))
