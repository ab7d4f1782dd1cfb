"""OpenLineage facets of the train → package → deploy chain (``get_openlineage_facets_on_complete``).

Datasets are named so the three tasks connect in a lineage backend:

- a PersistentVolumeClaim is ``pvc://<namespace>`` / ``<claim>`` (the training job writes it, the
  packaging task reads ``pvc://<claim>/<run>`` from it); a local directory is ``file`` / ``<path>``;
- a ModelKit is ``modelkit://<registry>`` / ``<repository>``, versioned by its manifest digest
  (``datasetVersion``), with a ``modelkit`` facet carrying reference, digest, signature and
  provenance references;
- an InferenceService is ``kserve://<namespace>`` / ``<name>``, versioned by the served revision.

Each task's run also carries the parent-run facet the OpenLineage provider adds (the DAG run), and
a facet of its own (``trainingJob``, ``modelkit``, ``inferenceService``). ``apache-airflow-providers-
openlineage`` is optional: this module imports it only when a method is called (by that provider).
"""

from __future__ import annotations

from typing import Any

from airflow_provider_training.client.state import job_images, mappings
from airflow_provider_training.kitops.reference import DEFAULT_TAG, parse
from airflow_provider_training.kitops.source import split_pvc
from airflow_provider_training.specs.refs import ObjectRef


def _dataset(namespace: str, name: str, facets: dict[str, Any] | None = None) -> Any:
    from airflow.providers.common.compat.openlineage.facet import Dataset

    return Dataset(namespace=namespace, name=name, facets=facets or {})


def _lineage(inputs: list[Any], outputs: list[Any], run_facets: dict[str, Any]) -> Any:
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets=run_facets)


def source_dataset(source: str, namespace: str = "default") -> Any:
    """A packaging/training location: ``pvc://claim/...`` -> the claim; else a local directory."""
    split = split_pvc(source)
    if split is not None:
        return _dataset(f"pvc://{namespace}", split[0])
    return _dataset("file", source)


def _version(value: str) -> Any:
    from openlineage.client.facet_v2 import dataset_version_dataset

    return dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=value)


def modelkit_dataset(
    reference: str, digest: str | None, signature: str | None = None, provenance: str | None = None
) -> Any:
    from airflow_provider_training.operators.lineage_facets import ModelKitDatasetFacet

    ref = parse(reference.removeprefix("kit://"), default_tag=DEFAULT_TAG, check_tcr=False)
    digest = digest or ref.digest
    facets: dict[str, Any] = {}
    if digest:
        facets["version"] = _version(digest)
        facets["modelkit"] = ModelKitDatasetFacet(
            reference=f"{ref.registry}/{ref.repository}:{ref.tag}" if ref.tag else f"{ref.registry}/{ref.repository}",
            digest=digest,
            signature=signature,
            provenance=provenance,
        )
    return _dataset(f"modelkit://{ref.registry}", ref.repository, facets)


def _asset_datasets(assets: Any) -> list[Any]:
    out = []
    for asset in assets or []:
        uri = getattr(asset, "uri", None)
        if uri:
            scheme, _, rest = str(uri).partition("://")
            host, _, path = rest.partition("/")
            out.append(_dataset(f"{scheme}://{host}" if rest else "asset", path or str(uri)))
    return out


# -- per operator ---------------------------------------------------------------------------------


def _claims(job: Any) -> tuple[list[str], list[str]]:
    """(read-only claims, writable claims) of a job document: volumes of every replica template,
    writable when any container mounts them without ``readOnly``."""
    read: set[str] = set()
    write: set[str] = set()
    for value in mappings(job):
        spec = value.get("spec") if isinstance(value.get("spec"), dict) else None
        if spec is not None and isinstance(spec.get("volumes"), list):
            by_volume = {}
            for vol in spec["volumes"]:
                pvc = (vol or {}).get("persistentVolumeClaim") or {}
                if pvc.get("claimName"):
                    by_volume[vol.get("name")] = (pvc["claimName"], bool(pvc.get("readOnly")))
            for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
                for mount in container.get("volumeMounts") or []:
                    claim = by_volume.get(mount.get("name"))
                    if claim:
                        (read if claim[1] or mount.get("readOnly") else write).add(claim[0])
    return sorted(read - write), sorted(write)


def training_lineage(op: Any) -> Any:
    submitted: ObjectRef | None = getattr(op, "_submitted", None)
    namespace = (submitted.namespace if submitted else None) or getattr(op, "namespace", None) or "default"
    job = getattr(op, "job", None)
    read, write = _claims(job if isinstance(job, dict) else {})
    inputs = [_dataset(f"pvc://{namespace}", c) for c in read] + _asset_datasets(getattr(op, "inlets", None))
    outputs = [_dataset(f"pvc://{namespace}", c) for c in write]
    facets: dict[str, Any] = {}
    if submitted:
        from airflow_provider_training.operators.lineage_facets import TrainingJobRunFacet

        facets["trainingJob"] = TrainingJobRunFacet(
            kind=submitted.kind,
            name=submitted.name,
            namespace=str(namespace),
            uid=submitted.uid or "",
            images=job_images(job) if isinstance(job, dict) else [],
        )
    return _lineage(inputs, outputs, facets)


class TrainingLineageMixin:
    """OpenLineage for the training job operators: inputs are read-only claims and the task's
    inlets, outputs the claims the job writes (the model output location)."""

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return training_lineage(self)


def modelkit_lineage(op: Any) -> Any:
    done = getattr(op, "_lineage", None)
    inputs = (
        [source_dataset(str(op.source), getattr(op, "namespace", "default"))] if getattr(op, "source", None) else []
    )
    if not done:
        return _lineage(inputs, [], {})
    ref, result = done
    output = modelkit_dataset(str(ref), result.get("digest"), result.get("signature"), result.get("provenance"))
    run_facets = {"modelkit": output.facets["modelkit"]} if "modelkit" in output.facets else {}
    return _lineage(inputs, [output], run_facets)


def deploy_lineage(op: Any) -> Any:
    from airflow_provider_training.operators.lineage_facets import InferenceServiceRunFacet

    done = getattr(op, "_lineage", None) or {}
    inputs = [modelkit_dataset(str(op.storage_uri), None)] if getattr(op, "storage_uri", None) else []
    if not done:
        return _lineage(inputs, [], {})
    facets: dict[str, Any] = {}
    if done.get("revision"):
        facets["version"] = _version(done["revision"])
    output = _dataset(f"kserve://{done['namespace']}", done["name"], facets)
    run = InferenceServiceRunFacet(
        name=done["name"],
        namespace=done["namespace"],
        storageUri=str(done.get("storage_uri") or ""),
        revision=str(done.get("revision") or ""),
        url=str(done.get("url") or ""),
    )
    return _lineage(inputs, [output], {"inferenceService": run})
