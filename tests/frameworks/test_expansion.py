"""$(VAR) expansion, table-driven from training-operator.md §7 (k8s expand_test.go cases)."""

from __future__ import annotations

import pytest

from airflow_provider_training.frameworks import expand, expand_command, resolve_env

MAPPING = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_EMPTY": "", "A": "a", "X": "x", "REF": "$(VAR_A)"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(VAR_A)", "A"),
        ("___$(VAR_B)___", "___B___"),
        ("$(VAR_A)-$(VAR_B)-$(VAR_C)", "A-B-C"),
        ("$(VAR_EMPTY)", ""),
        ("$(UNDEFINED)", "$(UNDEFINED)"),  # undefined stays literal
        ("$$(VAR_A)", "$(VAR_A)"),  # escape
        ("$$$$$$(X)", "$$$(X)"),
        ("$$$$$$$(A)", "$$$a"),
        ("foo$(VAR_A", "foo$(VAR_A"),  # unclosed
        ("$(VAR_A", "$(VAR_A"),
        ("$(", "$("),
        ("$VAR_A ${VAR_A} $?", "$VAR_A ${VAR_A} $?"),  # shell syntax untouched
        ("end$", "end$"),
        ("$", "$"),
        ("$(REF)", "$(VAR_A)"),  # no re-expansion
        ("$(A$(X))", "$(A$(X))"),  # name "A$(X" is undefined; the text passes through
        ("\\$(VAR_A)", "\\A"),  # backslash is not special
        ("$()", "$()"),
    ],
)
def test_expand(text: str, expected: str) -> None:
    assert expand(text, MAPPING) == expected


def test_env_sees_only_earlier_vars_command_sees_all_last_wins() -> None:
    env = resolve_env(
        {"FROM_CM": "cm"},
        [
            ("POD_IP_DUMMY", "127.0.0.5", False),  # valueFrom: resolved, not expanded
            ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543", True),
            ("EARLY", "$(LATE)-$(FROM_CM)", True),
            ("LATE", "late", True),
            ("RAW", "$(FROM_CM)", False),
            ("LATE", "override", True),
        ],
    )
    assert env == {
        "FROM_CM": "cm",
        "POD_IP_DUMMY": "127.0.0.5",
        "PADDLE_MASTER": "127.0.0.5:36543",
        "EARLY": "$(LATE)-cm",  # UNCHANGED_REFERENCE: declared later
        "LATE": "override",
        "RAW": "$(FROM_CM)",
    }
    assert expand_command(["echo", "$(LATE)", "$$(LATE)", "$(NOPE)"], env) == ["echo", "override", "$(LATE)", "$(NOPE)"]
