"""What a cluster accepts but can never run: the provider's own checks (level ``provider``).

The CRDs put no enum on restartPolicy or cleanPodPolicy, and the operator copies pod templates
into pods that the API server may then refuse (a volumeMount naming no volume, duplicate container
names…). Such a job sits in Created forever on a real cluster; we refuse it before submitting.
"""

from __future__ import annotations

import re

from airflow_provider_training.specs import kinds, names
from airflow_provider_training.specs.issues import Issue, index, join
from airflow_provider_training.specs.jobs import MPIJob, MXJob, PaddleJob, PyTorchJob, TFJob, TrainingJob
from airflow_provider_training.specs.pod import PodSpec

NPROC_PER_NODE = re.compile(r"^(auto|cpu|gpu|[1-9][0-9]*)$")
RDZV_BACKENDS = ("c10d", "etcd", "etcd-v2")


def _issue(path: str, message: str, rule: str = "runnable") -> Issue:
    return Issue(path, message, "provider", rule)


def _enum(path: str, value: str | None, allowed: tuple[str, ...], empty_ok: bool = True) -> list[Issue]:
    if value is None or (empty_ok and value == "") or value in allowed:
        return []
    shown = ", ".join(f'"{v}"' for v in allowed)
    return [_issue(path, f'Unsupported value: "{value}": supported values: {shown}')]


def check_pod(pod: PodSpec, path: str) -> list[Issue]:
    """Checks the API server applies when the operator creates a pod from this template."""
    issues: list[Issue] = []
    volumes = [v.name for v in pod.volumes or []]
    for i, name in enumerate(volumes):
        if name in volumes[:i]:
            issues.append(_issue(join(index(join(path, "volumes"), i), "name"), f'Duplicate value: "{name}"'))
    seen: list[str] = []
    all_containers = [("containers", c) for c in pod.containers] + [
        ("initContainers", c) for c in pod.init_containers or []
    ]
    counters: dict[str, int] = {}
    for group, container in all_containers:
        i = counters[group] = counters.get(group, -1) + 1
        cpath = index(join(path, group), i)
        for err in names.dns1123_label(container.name):
            issues.append(_issue(join(cpath, "name"), f'Invalid value: "{container.name}": {err}'))
        if container.name in seen:
            issues.append(_issue(join(cpath, "name"), f'Duplicate value: "{container.name}"'))
        seen.append(container.name)
        for j, mount in enumerate(container.volume_mounts or []):
            if mount.name not in volumes:
                issues.append(
                    _issue(
                        join(index(join(cpath, "volumeMounts"), j), "name"),
                        f'Not found: "{mount.name}": no volume of that name in the pod template; add it '
                        f"under {join(path, 'volumes')} (a real cluster refuses to create the pod)",
                    )
                )
        for j, port in enumerate(container.ports or []):
            if not 1 <= port.container_port <= 65535:
                issues.append(
                    _issue(
                        join(index(join(cpath, "ports"), j), "containerPort"),
                        f"Invalid value: {port.container_port}: must be between 1 and 65535, inclusive",
                    )
                )
        for j, env in enumerate(container.env or []):
            if not env.name:
                issues.append(_issue(join(index(join(cpath, "env"), j), "name"), "Required value"))
    return issues


def check(job: TrainingJob) -> list[Issue]:
    info = job.KIND
    field = f"spec.{info.replica_specs_field}"
    issues: list[Issue] = []
    if not job.replica_specs:
        issues.append(_issue(field, "Required value: at least one replica type must be given"))
    longest_index = 0
    for rtype, spec in job.replica_specs.items():
        base = index(field, rtype)
        issues += _enum(f"{base}.restartPolicy", spec.restart_policy, kinds.RESTART_POLICIES)
        if spec.replicas is not None and spec.replicas < 0:
            issues.append(
                _issue(f"{base}.replicas", f"Invalid value: {spec.replicas}: must be greater than or equal to 0")
            )
        longest_index = max(longest_index, (spec.replicas or 1) - 1)
        if spec.template and spec.template.spec:
            issues += check_pod(spec.template.spec, f"{base}.template.spec")
    issues += _enum("spec.runPolicy.cleanPodPolicy", job.run_policy.clean_pod_policy, kinds.CLEAN_POD_POLICIES)
    issues += _generated_names(job, longest_index)
    issues += _kind_specific(job)
    return issues


def _generated_names(job: TrainingJob, longest_index: int) -> list[Issue]:
    """Pods and headless Services are named ``{job}-{type}-{index}``; Services must be DNS-1035 labels."""
    name = job.metadata.name
    if not name or isinstance(job, MPIJob):
        return []
    longest = max((len(rt) for rt in job.replica_specs), default=0)
    generated = f"{name}-{'x' * longest}-{longest_index}"
    if len(generated) <= 63:
        return []
    return [
        _issue(
            "metadata.name",
            f'Too long: "{name}": the replica Services the operator creates ({{name}}-{{type}}-{{index}}) '
            f"would be {len(generated)} characters, over the 63 allowed; shorten the name to at most "
            f"{len(name) - (len(generated) - 63)} characters",
        )
    ]


def _kind_specific(job: TrainingJob) -> list[Issue]:
    issues: list[Issue] = []
    if isinstance(job, PyTorchJob):
        nproc = job.spec.nproc_per_node
        if nproc is not None and not NPROC_PER_NODE.match(nproc):
            issues.append(
                _issue("spec.nprocPerNode", f'Invalid value: "{nproc}": must be auto, cpu, gpu or a positive integer')
            )
        elastic = job.spec.elastic_policy
        if elastic is not None:
            issues += _enum("spec.elasticPolicy.rdzvBackend", elastic.rdzv_backend, RDZV_BACKENDS)
            low, high = elastic.min_replicas, elastic.max_replicas
            if low is not None and high is not None and low > high:
                issues.append(
                    _issue(
                        "spec.elasticPolicy.minReplicas", f"Invalid value: {low}: must not exceed maxReplicas ({high})"
                    )
                )
            if elastic.rdzv_conf is not None and not elastic.rdzv_conf:
                # The operator indexes the list's last element and crashes on an empty one.
                issues.append(
                    _issue(
                        "spec.elasticPolicy.rdzvConf",
                        "Invalid value: []: must not be an empty list (omit the field instead)",
                    )
                )
    elif isinstance(job, PaddleJob) and job.spec.elastic_policy is not None:
        low, high = job.spec.elastic_policy.min_replicas, job.spec.elastic_policy.max_replicas
        if low is not None and high is not None and low > high:
            issues.append(
                _issue("spec.elasticPolicy.minReplicas", f"Invalid value: {low}: must not exceed maxReplicas ({high})")
            )
    elif isinstance(job, TFJob):
        issues += _enum("spec.successPolicy", job.spec.success_policy, ("AllWorkers",))
        types = {kinds.TENSORFLOW.canonical_type(t) for t in job.replica_specs}
        if job.replica_specs and not types & {"Chief", "Master", "Worker"}:
            issues.append(
                _issue(
                    "spec.tfReplicaSpecs",
                    "Required value: a TFJob succeeds through its Chief, Master or Worker replicas; with none of them it never completes",
                )
            )
    elif isinstance(job, MPIJob):
        issues += _enum("spec.cleanPodPolicy", job.spec.clean_pod_policy, kinds.CLEAN_POD_POLICIES)
        slots = job.spec.slots_per_worker
        if slots is not None and slots < 1:
            issues.append(_issue("spec.slotsPerWorker", f"Invalid value: {slots}: must be at least 1"))
    elif isinstance(job, MXJob):
        issues += _enum("spec.jobMode", job.spec.job_mode, ("MXTrain", "MXTune"), empty_ok=False)
    return issues
