"""The runtime info the trainer controller builds before its plugins run (``pkg/runtime/core``
``newRuntimeInfo``, ``trainer-v2.md`` §3.1): propagated labels, the runtime's JobSet spec with the
TrainJob's runtime patches merged in and ``resourcesPerNode`` merged into the trainer's ``node``
container, and one pod set per replicatedJob with its pod count.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_training.frameworks.trainer import patch
from airflow_provider_training.specs import quantity
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.models import MLPolicy, TrainingRuntime, TrainJob


class BuildError(ValueError):
    """The controller cannot build the TrainJob's objects (a ``TrainJobResourcesCreationFailed`` event)."""


@dataclass
class PodSet:
    name: str
    ancestor: str | None
    count: int
    index: int  # position of the replicatedJob in the JobSet spec


@dataclass
class RuntimeInfo:
    trainjob: TrainJob
    runtime: TrainingRuntime
    ml_policy: MLPolicy
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: dict[str, Any]  # the JobSet spec being built (mutated by the plugins)
    podsets: list[PodSet] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.trainjob.name

    def replicated_job(self, podset: PodSet) -> dict[str, Any]:
        job: dict[str, Any] = self.spec["replicatedJobs"][podset.index]
        return job

    def pod_spec(self, podset: PodSet) -> dict[str, Any]:
        job = self.replicated_job(podset)
        pod: dict[str, Any] = job.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
        spec: dict[str, Any] = pod.setdefault("spec", {})
        return spec

    def podset(self, name: str) -> PodSet | None:
        return next((ps for ps in self.podsets if ps.name == name), None)

    def podset_by_ancestor(self, ancestor: str) -> PodSet | None:
        return next((ps for ps in self.podsets if ps.ancestor == ancestor), None)

    def container(self, podset: PodSet | None, name: str, *, init_too: bool = True) -> dict[str, Any] | None:
        """``FindContainerByPodSetName``: containers first, then init containers."""
        if podset is None:
            return None
        pod = self.pod_spec(podset)
        groups = ("containers", "initContainers") if init_too else ("containers",)
        for group in groups:
            for container in pod.get(group) or []:
                if container.get("name") == name:
                    found: dict[str, Any] = container
                    return found
        return None

    def trainer_container(self) -> dict[str, Any] | None:
        """Container ``node`` of the replicatedJob labelled ``trainjob-ancestor-step: trainer``."""
        return self.container(self.podset_by_ancestor(c.ANCESTOR_TRAINER), c.NODE, init_too=False)

    def runtime_resources(self) -> dict[str, Any] | None:
        """``ExtractResourcePerNodeFromRuntime``: the first ``node`` job or trainer job whose ``node``
        container has resources."""
        for job in self.spec.get("replicatedJobs") or []:
            labels = ((job.get("template") or {}).get("metadata") or {}).get("labels") or {}
            if job.get("name") == c.NODE or labels.get(c.LABEL_ANCESTOR) == c.ANCESTOR_TRAINER:
                pod = (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
                for container in pod.get("containers") or []:
                    if container.get("name") == c.NODE and container.get("resources") is not None:
                        resources = container["resources"]
                        return {"limits": resources.get("limits") or {}, "requests": resources.get("requests") or {}}
        return None

    def resources_per_node(self) -> dict[str, Any]:
        """The TrainJob's ``resourcesPerNode`` (un-merged) if set, else the runtime's, as the plugins read it."""
        trainer = self.trainjob.spec.trainer
        if trainer is not None and trainer.resources_per_node is not None:
            return trainer.resources_per_node.to_dict()
        return self.runtime_resources() or {}


def gpus_per_node(resources: dict[str, Any]) -> int:
    """``GetNumGPUPerNode``: the first resource whose name contains ``gpu``, requests before limits."""

    def count(resource_list: dict[str, Any] | None) -> int:
        for name, amount in (resource_list or {}).items():
            if "gpu" in name.lower():
                return quantity.ceil_value(amount)
        return 0

    requested = count(resources.get("requests"))
    limited = count(resources.get("limits"))
    return limited if requested == 0 and limited > 0 else requested


def cpus_per_node(resources: dict[str, Any]) -> int:
    """``getNumCPUPerNode``: requests.cpu rounded up, else limits.cpu, else 0."""
    request = (resources.get("requests") or {}).get("cpu")
    if request is None or quantity.decimal_value(request) in (None, 0):
        limit = (resources.get("limits") or {}).get("cpu")
        return quantity.ceil_value(limit) if limit is not None else 0
    return quantity.ceil_value(request)


def merge_resources(base: dict[str, Any] | None, override: dict[str, Any]) -> dict[str, Any]:
    """``MergeResourceRequirements``: limits and requests merge per resource name, override winning."""
    out: dict[str, Any] = copy.deepcopy(base or {})
    for part in ("limits", "requests", "claims"):
        if part not in override:
            continue
        if part == "claims":
            out[part] = copy.deepcopy(override[part])
            continue
        merged = dict(out.get(part) or {})
        # as the controller's Go structs write them back: kube-apiserver's canonical strings
        merged.update(quantity.canonical_map(override[part] or {}, f"resources.{part}"))
        out[part] = merged
    return out


def new_runtime_info(trainjob: TrainJob, runtime: TrainingRuntime) -> RuntimeInfo:
    """Runtime info for ``trainjob`` on ``runtime`` (both with CRD defaults applied)."""
    template = runtime.spec.template
    labels = dict(template.metadata.labels or {}) if template.metadata else {}
    annotations = dict(template.metadata.annotations or {}) if template.metadata else {}
    spec: dict[str, Any] = template.spec.to_dict()
    order = {job.get("name"): i for i, job in enumerate(spec.get("replicatedJobs") or [])}
    for runtime_patch in trainjob.spec.runtime_patches or []:
        template_patch = (runtime_patch.training_runtime_spec or {}).get("template") or {}
        metadata = template_patch.get("metadata") or {}
        labels.update(metadata.get("labels") or {})
        annotations.update(metadata.get("annotations") or {})
        if template_patch.get("spec") is not None:
            spec = patch.merge(spec, template_patch["spec"])
    # Put the replicatedJobs back in the runtime's order (a patch may only append).
    spec["replicatedJobs"] = sorted(
        spec.get("replicatedJobs") or [], key=lambda job: order.get(job.get("name"), len(order))
    )
    ml_policy = runtime.spec.ml_policy
    info = RuntimeInfo(trainjob, runtime, ml_policy or MLPolicy(), labels, annotations, spec)
    trainer = trainjob.spec.trainer
    run_launcher_as_node = bool(ml_policy and ml_policy.mpi and ml_policy.mpi.run_launcher_as_node)
    for i, job in enumerate(spec["replicatedJobs"]):
        job_template = job.get("template") or {}
        count = int((job_template.get("spec") or {}).get("parallelism", 1))
        job_labels = (job_template.get("metadata") or {}).get("labels") or {}
        ancestor = job_labels.get(c.LABEL_ANCESTOR)
        if ancestor == c.ANCESTOR_TRAINER and ml_policy is not None:
            count = ml_policy.num_nodes if ml_policy.num_nodes is not None else 1
        if trainer is not None and trainer.resources_per_node is not None:
            trainer_job = ancestor == c.ANCESTOR_TRAINER and ml_policy is not None
            if trainer_job or (run_launcher_as_node and job.get("name") == c.NODE):
                pod = (job_template.get("spec") or {}).get("template", {}).get("spec") or {}
                for container in pod.get("containers") or []:
                    if container.get("name") == c.NODE:
                        container["resources"] = merge_resources(
                            container.get("resources"), trainer.resources_per_node.to_dict()
                        )
                        break
        info.podsets.append(PodSet(str(job.get("name")), ancestor, count, i))
    return info
