"""One quantity module: the cases of both former canonicalisers (``embedded/quantity.py`` for
admission, ``specs/trainer/quantity.py`` for Trainer builds) give kube-apiserver's strings
(``resource.Quantity``'s canonical form), through admission's function and through a TrainJob's build."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_training.frameworks.trainer import build
from airflow_provider_training.specs import quantity
from airflow_provider_training.specs.trainer import default_runtimes, documents
from airflow_provider_training.specs.trainer.models import TrainJob
from tests.factories import trainjob

# (written, what kube-apiserver returns). The admission canonicaliser's own cases are
# tests/conformance/test_quantity.py's (run against this module); these are its docstring's
ADMISSION_CASES = [(1, "1"), (0.5, "500m"), (1000, "1k"), ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"), ("1.5Ki", "1536")]
# specs/trainer/quantity.py's docstring, the issue and the Trainer tests: JSON numbers the Kubeflow
# SDK sends, where the Trainer's canonicaliser gave "1000", "0.0001", "1000000000", and strings it kept
TRAINER_CASES = [
    (1.0, "1"), (0.5, "500m"), (1000, "1k"), (0.0001, "100u"), (1000000000, "1G"), (2, "2"), (8, "8"),
    ("2.5", "2500m"), ("0.7", "700m"), ("2500m", "2500m"), ("1Gi", "1Gi"),
]  # fmt: skip


@pytest.mark.parametrize(("written", "returned"), ADMISSION_CASES + TRAINER_CASES)
def test_admission_stores_kube_apiserver_strings(written: Any, returned: str) -> None:
    assert quantity.canonical(written) == returned


def _built_resources(resources: dict[str, Any]) -> dict[str, Any]:
    checked = documents.check_document(trainjob(resourcesPerNode=resources))
    assert checked.errors == [], checked.errors
    assert isinstance(checked.object, TrainJob)
    built = build(checked.object, default_runtimes()["torch-distributed"])
    node = next(j for j in built.jobset["spec"]["replicatedJobs"] if j["name"] == "node")
    container = next(c for c in node["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == "node")
    return container["resources"]


# a fractional JSON number is no int-or-string: the TrainJob CRD refuses it before any build
BUILD_CASES = [(w, r) for w, r in TRAINER_CASES if not (isinstance(w, float) and not w.is_integer())]


@pytest.mark.parametrize(("written", "returned"), BUILD_CASES)
def test_trainjob_build_writes_kube_apiserver_strings(written: Any, returned: str) -> None:
    assert _built_resources({"limits": {"cpu": written}}) == {"limits": {"cpu": returned}}


@pytest.mark.parametrize(("written", "count"), [("2.5", 3), ("0.7", 1), ("2500m", 3), (2, 2), ("lots", 0)])
def test_value_rounds_up_as_quantity_value(written: Any, count: int) -> None:
    assert quantity.ceil_value(written) == count


def test_more_digits_than_a_float_holds_stay_exact() -> None:
    assert quantity.canonical("1234567890123456789012345678901") == "1234567890123456789012345678901"
    assert quantity.canonical("-1000000000000000000.1") == "-1000000000000000000100m"


def test_oversized_values() -> None:
    digits = "1" + "0" * 5000
    assert quantity.canonical(digits) == "1" + "0" * 4982 + "E"  # decimal SI ends at E
    assert quantity.canonical(10**5000) == "1" + "0" * 4982 + "E"
    assert quantity.canonical("1e999999999") == "1e999999999"
    # binary SI is capped at 2^63-1, as upstream's parser caps it
    assert quantity.canonical("9" * 40 + "Ki") == "9223372036854775807"
    assert quantity.canonical("-123456789012345678901234567Ki") == "-9223372036854775807"


@pytest.mark.parametrize("hostile", ["1e" + "9" * 5000, "1e9999999999", "1e-2147483649", "1 Gi", "1Gi\x00", "0x10"])
def test_hostile_values_are_not_quantities(hostile: str) -> None:
    with pytest.raises(quantity.QuantityError, match="quantities must match the regular expression"):
        quantity.canonical(hostile)


def test_below_nano_rounds_up_in_magnitude() -> None:
    assert quantity.canonical("0.0000000015") == "2n"
    assert quantity.canonical("-0.0000000015") == "-2n"
    assert quantity.canonical("-0.0000000001") == "-1n"
