"""DeployApprovalOperator's switch, without a deployment (the approve/reject flow
itself runs in Chromium: tests/ui/test_approval.py)."""

from __future__ import annotations

import pytest

from airflow_provider_training.operators.approval import flag


@pytest.mark.parametrize(("value", "expected"), [("True", True), ("False", False), (True, True), ("", False)])
def test_the_rendered_param_switches_the_approval(value: object, expected: bool) -> None:
    assert flag("enabled", value) is expected


def test_a_value_that_is_neither_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"enabled='maybe': use true or false"):
        flag("enabled", "maybe")
