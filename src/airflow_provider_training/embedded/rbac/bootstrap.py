"""The policy a fresh cluster has, installed into the store when the daemon starts: kube-apiserver's
bootstrap roles and bindings (``cluster-admin`` for ``system:masters``, ``admin`` / ``edit`` /
``view`` by aggregation, ``system:basic-user``, ``system:discovery``, ``system:public-info-viewer``)
and the Kubeflow Training Operator's and Trainer's aggregated roles, all read from the vendored
manifests in ``policy/`` (their origin is in each file's header).

As kube-apiserver's RBAC post-start hook does, a missing object is created and one annotated
``rbac.authorization.kubernetes.io/autoupdate: "true"`` gets back the rules and subjects it lost
(added, never removed); the annotation set to ``"false"`` leaves it as the user made it.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

from airflow_provider_training.embedded.store import AlreadyExistsError, ConflictError, Store
from airflow_provider_training.specs.resources import BY_KIND
from airflow_provider_training.specs.unstructured import Unstructured

POLICY = Path(__file__).with_name("policy")
FILES = ("kubernetes-bootstrap.yaml", "kubeflow-training-roles.yaml", "kubeflow-trainer-roles.yaml")
AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"


@functools.cache
def default_objects() -> tuple[Unstructured, ...]:
    out: list[Unstructured] = []
    for name in FILES:
        for doc in yaml.safe_load_all((POLICY / name).read_text()):
            if not doc:
                continue
            out += doc["items"] if doc.get("kind") == "List" else [doc]
    return tuple(out)


def install(store: Store) -> int:
    """Create or repair the default policy; returns how many objects were written."""
    written = 0
    for template in default_objects():
        rt = BY_KIND[template["kind"]]
        name = template["metadata"]["name"]
        current = store.get(rt.key, "", name)
        try:
            if current is None:
                store.create(rt.key, copy.deepcopy(template))
                written += 1
            elif (current["metadata"].get("annotations") or {}).get(AUTOUPDATE) == "true":
                repaired = _repair(current, template)
                if repaired is not None:
                    store.update(rt.key, repaired)
                    written += 1
        except (AlreadyExistsError, ConflictError):
            continue  # written meanwhile (an API request): theirs stands
    return written


def _repair(current: Unstructured, template: Unstructured) -> Unstructured | None:
    """What reconciliation adds back: missing rules, subjects and the aggregation rule."""
    new = copy.deepcopy(current)
    if template.get("aggregationRule") and not new.get("aggregationRule"):
        new["aggregationRule"] = copy.deepcopy(template["aggregationRule"])
    for field in ("rules", "subjects"):
        for item in template.get(field) or []:
            if item not in (new.get(field) or []):
                new[field] = [*(new.get(field) or []), copy.deepcopy(item)]
    return None if new == current else new
