"""Run names and tags come from what every run has (run id, run_after): valid Kubernetes names and
OCI tags, unique per run, also for runs without a logical date; missing params fail with a sentence."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from airflow_provider_training.operators import identity
from airflow_provider_training.operators.naming import (
    DNS_1035,
    MACROS,
    TAG,
    MissingRunValue,
    names_for,
    require_param,
    run_name_for,
    run_tag_for,
)

AFTER = datetime(2026, 11, 30, 23, 45, 12, tzinfo=timezone.utc)


def test_two_runs_on_the_same_day_and_second_get_different_names_and_tags():
    a = ("train_package_deploy", "manual__2026-11-30T23:45:12.100000+00:00", AFTER)
    b = ("train_package_deploy", "manual__2026-11-30T23:45:12.200000+00:00", AFTER)
    assert run_name_for("digits", *a) != run_name_for("digits", *b)
    assert run_tag_for("", *a) != run_tag_for("", *b)
    assert run_name_for("digits", *a).startswith("digits-20261130t234512-")
    # stable for one run: a retry or a re-render names the same job and folder
    assert run_name_for("digits", *a) == run_name_for("digits", *a)


@pytest.mark.parametrize(
    "prefix",
    ["digits", "Train_Package_Deploy", "9-starts-with-digit", "x" * 80, "", "---", "ümlaut.job"],
)
@pytest.mark.parametrize(
    "run_id",
    ["manual__2026-11-30T23:45:12+00:00", "asset_triggered__2026-11-30T23:45:12.5+00:00", "a" * 250, "ü/ß:+"],
)
def test_names_are_dns_1035_with_room_for_replica_suffixes_and_tags_are_oci_tags(prefix, run_id):
    name = run_name_for(prefix, "dag", run_id, AFTER)
    assert DNS_1035.match(name), name
    # the longest pod name: <name>-r<try>-<replica type>-<index>
    assert len(identity.retry_name(name, 12) + "-launcher-0") <= 63
    assert len(name) <= identity.MAX_NAME
    tag = run_tag_for(prefix, "dag", run_id, AFTER)
    assert TAG.match(tag), tag


def test_run_after_as_string_or_missing_still_names_the_run():
    assert run_tag_for("", "d", "r", "2026-11-30T23:45:12+00:00").startswith("20261130t234512-")
    assert re.fullmatch(r"[0-9a-f]{6}", run_tag_for("", "d", "r", None))
    with pytest.raises(MissingRunValue, match="run_id"):
        run_tag_for("", "d", "", AFTER)


def test_macros_render_in_jinja_from_the_task_context():
    from jinja2 import Environment

    env = Environment()
    env.globals.update(MACROS)
    dag_run = SimpleNamespace(run_id="manual__x", dag_id="d", run_after=AFTER)
    out = env.from_string("{{ run_name('digits') }} {{ run_tag('ui') }}").render(
        run_id="manual__x", dag_run=dag_run, dag=SimpleNamespace(dag_id="d")
    )
    names = names_for({"run_id": "manual__x", "dag_run": dag_run, "dag": SimpleNamespace(dag_id="d")}, "ui")
    assert out.split() == [run_name_for("digits", "d", "manual__x", AFTER), names["tag"]]


def test_a_missing_param_fails_with_the_param_and_how_to_pass_it():
    with pytest.raises(MissingRunValue) as caught:
        require_param({"kind": None}, "kind", "ui_triggered_training", "PyTorchJob")
    text = str(caught.value)
    assert "param 'kind'" in text
    assert """airflow dags trigger ui_triggered_training --conf '{"kind": "PyTorchJob"}'""" in text
    assert require_param({"epochs": 3}, "epochs", "d", 1) == 3
