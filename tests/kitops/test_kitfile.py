"""Kitfile parsing and validation against kit's own test cases (shared/testdata/kitops)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from airflow_provider_training.specs.gojson import go_float
from airflow_provider_training.specs.kitfile import Kitfile, KitfileError, check
from tests.paths import KITOPS_TESTDATA

DATA = KITOPS_TESTDATA
PARAMS = sorted((DATA / "kitops-v1.7.0/parameters").glob("*.yaml"))
VALIDATION = sorted((DATA / "kitops-upstream-2026/validation").glob("*.yaml"))


@pytest.mark.parametrize("case", PARAMS, ids=lambda p: p.stem)
def test_parameters_roundtrip_to_kit_json(case: Path) -> None:
    data = yaml.safe_load(case.read_text())
    assert Kitfile.from_yaml(data["kitfileYaml"]).to_config_json().decode() == data["kitfileJson"]


@pytest.mark.parametrize("case", VALIDATION, ids=lambda p: p.stem)
def test_validation_cases(case: Path) -> None:
    data = yaml.safe_load(case.read_text())
    kitfile = Kitfile.from_yaml(data["kitfile"])
    expected = data.get("errRegexp") or ""
    if not expected:
        check(kitfile)
        return
    with pytest.raises(KitfileError) as err:
        check(kitfile)
    assert re.search(expected, str(err.value)), str(err.value)


def test_scalars_keep_literal_text_like_yaml_v3() -> None:
    kf = Kitfile.from_yaml(
        "manifestVersion: 1.0\npackage:\n  version: 1.10\n  name: yes\nmodel:\n  path: m\n  parameters:\n"
        "    a: yes\n    b: 010\n    c: 0o17\n    d: 1.2e+3\n    e: 2024-01-02\n"
        "    f: ~\n    g: 0xFF\n    h: '<&>'\n"
    )
    assert kf.manifest_version == "1.0"
    assert kf.package.version == "1.10"
    assert kf.package.name == "yes"
    assert kf.to_config_json() == (
        b'{"manifestVersion":"1.0","package":{"name":"yes","version":"1.10"},"model":{"path":"m",'
        b'"parameters":{"a":"yes","b":8,"c":15,"d":1200,"e":"2024-01-02T00:00:00Z","f":null,"g":255,'
        b'"h":"\\u003c\\u0026\\u003e"}}}'
    )


def test_unknown_and_duplicate_keys_are_errors() -> None:
    with pytest.raises(KitfileError, match=r"model\.pth not found in type Kitfile"):
        Kitfile.from_yaml("manifestVersion: 1.0.0\nmodel:\n  pth: x\n")
    with pytest.raises(KitfileError, match='line 3: mapping key "path" already defined'):
        Kitfile.from_yaml("model:\n  path: a\n  path: b\n")
    with pytest.raises(KitfileError, match="digest and diffId are computed by pack"):
        Kitfile.from_yaml("model:\n  path: a\n  digest: sha256:00\n")


def test_inf_parameter_aborts_like_go_json() -> None:
    kf = Kitfile.from_yaml("model:\n  path: m\n  parameters:\n    x: .inf\n")
    with pytest.raises(KitfileError, match="unsupported value"):
        kf.to_config_json()


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (12.3, "12.3"),
        (1200.0, "1200"),
        (1e-7, "1e-7"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-6, "0.000001"),
        (-0.0, "-0"),
    ],
)
def test_go_float_formatting(value: float, text: str) -> None:
    assert go_float(value) == text


def test_empty_kitfile_config_keeps_package() -> None:
    assert Kitfile.from_yaml("manifestVersion: 1.0.0\n").to_config_json() == b'{"manifestVersion":"1.0.0","package":{}}'


def test_docs_path_is_always_emitted_and_yaml_roundtrips() -> None:
    kf = Kitfile.from_yaml("manifestVersion: 1.0.0\ndocs:\n  - description: d\n")
    assert b'"docs":[{"path":"","description":"d"}]' in kf.to_config_json()
    again = Kitfile.from_yaml(kf.to_yaml())
    assert again.to_config_json() == kf.to_config_json()
