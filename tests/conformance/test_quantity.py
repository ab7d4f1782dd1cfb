"""Quantities as kube-apiserver writes them back (``resource.Quantity.String()``)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_training.embedded.canonical import image_pull_policy, qos_class
from airflow_provider_training.specs.quantity import QuantityError, canonical


@pytest.mark.parametrize(
    ("written", "returned"),
    [
        (1, "1"),
        (0.5, "500m"),
        ("0.5", "500m"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("2000m", "2"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("1.5Ki", "1536"),  # binary with a fraction of a Ki falls back to decimal
        ("512", "512"),
        (2147483648, "2147483648"),  # decimal stays decimal
        ("1e3", "1e3"),
        ("1.5e3", "1500"),
        ("0.1m", "100u"),
        ("0.0000000001", "1n"),  # below nano: rounded up
        ("0Mi", "0"),
        ("+1", "1"),
    ],
)
def test_canonical_quantity(written: Any, returned: str) -> None:
    assert canonical(written) == returned


@pytest.mark.parametrize("bad", ["", "1.2.3", "one", "1Gb", "1 Gi", True, None, [1]])
def test_not_a_quantity(bad: Any) -> None:
    with pytest.raises(QuantityError):
        canonical(bad)


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("python", "Always"),
        ("python:latest", "Always"),
        ("localhost:5000/python", "Always"),
        ("python:3.11", "IfNotPresent"),
        ("ghcr.io/kitops-ml/kit:v1", "IfNotPresent"),
        ("python@sha256:" + "0" * 64, "IfNotPresent"),
    ],
)
def test_image_pull_policy_by_tag(image: str, policy: str) -> None:
    assert image_pull_policy(image) == policy


def test_qos_class() -> None:
    both = {"cpu": "1", "memory": "1Gi"}
    assert qos_class({"containers": [{"resources": {}}]}) == "BestEffort"
    assert qos_class({"containers": [{"resources": {"limits": both, "requests": both}}]}) == "Guaranteed"
    assert qos_class({"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}) == "BestEffort"
    assert qos_class({"containers": [{"resources": {"requests": {"cpu": "1"}}}]}) == "Burstable"
