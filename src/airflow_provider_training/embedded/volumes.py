"""PersistentVolumeClaims backed by directories of the data directory, bound at once as with a
default StorageClass. A pod that names a claim that does not exist gets one made for it."""

from __future__ import annotations

import uuid
from pathlib import Path

from airflow_provider_training.embedded.events import record_event
from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.resources import PVCS
from airflow_provider_training.embedded.store import AlreadyExistsError, Store
from airflow_provider_training.specs.unstructured import Unstructured

STORAGE_CLASS = "local-path"
DEFAULT_SIZE = "1Gi"


def bind(home: Home, claim: Unstructured) -> Unstructured:
    """Fill in what the provisioner would (volume, class, Bound status) and create the directory."""
    meta = claim["metadata"]
    spec = claim.setdefault("spec", {})
    spec.setdefault("accessModes", ["ReadWriteOnce"])
    spec.setdefault("resources", {"requests": {"storage": DEFAULT_SIZE}})
    spec.setdefault("storageClassName", STORAGE_CLASS)
    spec.setdefault("volumeMode", "Filesystem")
    spec.setdefault("volumeName", f"pvc-{uuid.uuid4()}")
    claim["status"] = {
        "phase": "Bound",
        "accessModes": spec["accessModes"],
        "capacity": {"storage": spec.get("resources", {}).get("requests", {}).get("storage", DEFAULT_SIZE)},
    }
    make_claim_dir(home.claim_dir(meta["namespace"], meta["name"]))
    return claim


def make_claim_dir(path: Path) -> None:
    """A claim's directory, writable by any user of the pods that mount it, as the local-path
    provisioner makes it (0777); one that exists is left as it is (``fsGroup`` may have changed it)."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o777)


def claims_of(pod: Unstructured) -> list[str]:
    volumes = pod.get("spec", {}).get("volumes") or []
    return [
        v["persistentVolumeClaim"]["claimName"] for v in volumes if v.get("persistentVolumeClaim", {}).get("claimName")
    ]


def ensure_claims(store: Store, home: Home, pod: Unstructured) -> None:
    namespace = pod["metadata"]["namespace"]
    for name in claims_of(pod):
        if store.get(PVCS.key, namespace, name) is not None:
            continue
        claim = bind(
            home,
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": namespace},
            },
        )
        try:
            created = store.create(PVCS.key, claim)
        except AlreadyExistsError:
            continue
        record_event(
            store,
            created,
            "Normal",
            "ProvisioningSucceeded",
            f"Successfully provisioned volume {claim['spec']['volumeName']} for pod "
            f"{pod['metadata']['name']} at {home.claim_dir(namespace, name)}",
            "local-path-provisioner",
        )
