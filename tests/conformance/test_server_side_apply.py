"""``kubectl apply --server-side``: apply, re-apply, a conflicting apply by another manager, and
``--force-conflicts``, with the field ownership a cluster keeps."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conformance.conftest import Kubectl

CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: demo}
data:
  mode: fast
  epochs: "3"
"""


def _managers(kubectl: Kubectl) -> dict[str, dict[str, object]]:
    obj = json.loads(kubectl("get", "configmap", "settings", "-o", "json", "--show-managed-fields").stdout)
    return {e["manager"]: e for e in obj["metadata"]["managedFields"]}


def test_apply_reapply_conflict_force(kubectl: Kubectl, tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(CONFIG)
    second.write_text(CONFIG.replace("fast", "slow").replace('  epochs: "3"\n', ""))
    assert kubectl("apply", "--server-side", "-f", str(first)).stdout.strip() == "configmap/settings serverside-applied"
    version = kubectl("get", "configmap", "settings", "-o", "jsonpath={.metadata.resourceVersion}").stdout
    assert kubectl("apply", "--server-side", "-f", str(first)).stdout.strip() == "configmap/settings serverside-applied"
    # a re-apply that changes nothing writes nothing
    assert kubectl("get", "configmap", "settings", "-o", "jsonpath={.metadata.resourceVersion}").stdout == version
    owned = _managers(kubectl)["kubectl"]
    assert owned["operation"] == "Apply"
    assert owned["fieldsV1"] == {"f:data": {"f:epochs": {}, "f:mode": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}

    conflict = kubectl("apply", "--server-side", "--field-manager=tuner", "-f", str(second), check=False)
    assert conflict.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .data.mode' in conflict.stderr
    assert json.loads(kubectl("get", "configmap", "settings", "-o", "json").stdout)["data"]["mode"] == "fast"

    kubectl("apply", "--server-side", "--field-manager=tuner", "--force-conflicts", "-f", str(second))
    data = json.loads(kubectl("get", "configmap", "settings", "-o", "json").stdout)["data"]
    assert data == {"mode": "slow", "epochs": "3"}
    managers = _managers(kubectl)
    assert managers["kubectl"]["fieldsV1"] == {"f:data": {"f:epochs": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
    assert "f:mode" in managers["tuner"]["fieldsV1"]["f:data"]  # type: ignore[index]

    # the first manager drops epochs from its configuration: nobody else owns it, so it goes
    first.write_text(CONFIG.replace("fast", "slow").replace('  epochs: "3"\n', ""))
    kubectl("apply", "--server-side", "-f", str(first))
    assert json.loads(kubectl("get", "configmap", "settings", "-o", "json").stdout)["data"] == {"mode": "slow"}


def test_apply_over_an_object_kubectl_create_made(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl("create", "configmap", "settings", "--from-literal=mode=manual")
    (tmp_path / "a.yaml").write_text(CONFIG)
    done = kubectl("apply", "--server-side", "-f", str(tmp_path / "a.yaml"), check=False)
    assert 'conflict with "kubectl-create" using v1: .data.mode' in done.stderr
