"""Training Operator v1 job → Kubeflow Trainer v2 TrainJob (+ the runtime it needs), print-only.

Every field of the input is accounted for: it is either *mapped* (to a TrainJob field, a runtime
patch or a generated runtime), *changed* (carried, but Trainer v2 gives it a different meaning) or
*lost* (no Trainer v2 equivalent), and a final sweep reports any leaf no rule claimed, so nothing is
dropped silently.

Kinds with a Trainer v2 plugin (PyTorchJob → ``torch-distributed``, JAXJob → ``jax-distributed``,
XGBoostJob → ``xgboost-distributed``) become a TrainJob on that default ClusterTrainingRuntime:
image, command, args, env and resources go to ``spec.trainer``; volumes, mounts, node selectors,
tolerations, affinity, pod labels… go to one ``runtimePatches`` entry. Pod fields a runtime patch
cannot carry (sidecars, init containers, ports, probes, workingDir, envFrom, restartPolicy…) move
the TrainJob onto a generated TrainingRuntime: a copy of the default runtime with those fields.
MPIJob, TFJob, PaddleJob and MXJob have no v2 plugin of their own here; their pod templates become a
generated TrainingRuntime (MPI: ``launcher`` + ``node`` under an ``mpi`` policy; others: a plain
runtime), and what the v1 operator injected (TF_CONFIG, PADDLE_*, MX_CONFIG…) is reported missing.
"""

from __future__ import annotations

import bisect
import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_provider_training.specs.kinds import KINDS
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.runtimes import default_runtime_document
from airflow_provider_training.specs.yamldump import safe_dump_all

MANAGER = "airflow-provider-training.io/migrate"

Kind = Literal["mapped", "changed", "lost"]


@dataclass(frozen=True)
class Finding:
    path: str
    message: str
    kind: Kind

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass
class Migration:
    source: dict[str, Any]
    trainjob: dict[str, Any]
    runtime: dict[str, Any] | None = None
    findings: list[Finding] = field(default_factory=list)

    def documents(self) -> list[dict[str, Any]]:
        return [self.runtime, self.trainjob] if self.runtime is not None else [self.trainjob]

    def by_kind(self, kind: Kind) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def render(self) -> str:
        """YAML ready for ``kubectl apply -f -``, with the findings as comments on top."""
        meta = self.source.get("metadata") or {}
        lines = [f"# {self.source.get('kind')} {meta.get('name', '')} migrated to Kubeflow Trainer v2.3.0"]
        titles = {
            "lost": "NOT carried over",
            "changed": "carried over with a different meaning",
            "mapped": "mapped",
        }
        for kind in ("lost", "changed", "mapped"):
            found = [f for f in self.findings if f.kind == kind]
            if found:
                lines.append(f"# {titles[kind]}:")
                lines += [f"#   {finding}" for finding in found]
        body = safe_dump_all(self.documents())
        return "\n".join(lines) + "\n---\n" + body


# --- accounting ----------------------------------------------------------------------------------


def _leaves(value: Any, path: str) -> list[str]:
    if isinstance(value, dict) and value:
        return [leaf for key, item in value.items() for leaf in _leaves(item, _child(path, key, value))]
    if isinstance(value, list) and value:
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, f"{path}[{i}]")]
    return [path]


def _child(path: str, key: str, parent: dict[str, Any]) -> str:
    if path.endswith("ReplicaSpecs") or path.endswith((".labels", ".annotations", ".nodeSelector")):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class _Ledger:
    def __init__(self, document: dict[str, Any]) -> None:
        self.leaves = _leaves(document, "")
        # sorted, so that the leaves under a path are one slice: a claim per field over every leaf
        # made a job with thousands of env entries quadratic
        self._sorted = sorted(self.leaves)
        self.claimed: set[str] = set()
        self.findings: list[Finding] = []

    def _under(self, path: str) -> list[str]:
        """The leaves at ``path`` or below it."""
        matched = []
        for i in range(bisect.bisect_left(self._sorted, path), len(self._sorted)):
            leaf = self._sorted[i]
            if not leaf.startswith(path):
                break
            if len(leaf) == len(path) or leaf[len(path)] in ".[":
                matched.append(leaf)
        return matched

    def claim(self, path: str, message: str, kind: Kind = "mapped", *, quiet: bool = False) -> None:
        matched = self._under(path)
        if not matched:
            return
        self.claimed.update(matched)
        if not quiet:
            self.findings.append(Finding(path, message, kind))

    def note(self, path: str, message: str, kind: Kind) -> None:
        self.findings.append(Finding(path, message, kind))

    def sweep(self) -> None:
        for leaf in self.leaves:
            if leaf not in self.claimed:
                self.findings.append(Finding(leaf, "no Trainer v2 equivalent; left out", "lost"))


# --- v1 environment references --------------------------------------------------------------------

# v1 variable -> the v2 variables (joined with ":") that carry the same value, per kind.
RENAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "PyTorchJob": {
        "MASTER_ADDR": (c.TORCH_ENV_MASTER_ADDR,),
        "MASTER_PORT": (c.TORCH_ENV_MASTER_PORT,),
        "RANK": (c.TORCH_ENV_NODE_RANK,),
        "PET_RDZV_ENDPOINT": (c.TORCH_ENV_MASTER_ADDR, c.TORCH_ENV_MASTER_PORT),
    },
    "JAXJob": {"NUM_PROCESSES": (c.JAX_ENV_NUM_PROCESSES,), "PROCESS_ID": (c.JAX_ENV_PROCESS_ID,)},
    "XGBoostJob": {
        "MASTER_ADDR": (c.XGBOOST_ENV_TRACKER_URI,),
        "MASTER_PORT": (c.XGBOOST_ENV_TRACKER_PORT,),
        "RANK": (c.XGBOOST_ENV_TASK_ID,),
        "WORLD_SIZE": (c.XGBOOST_ENV_NUM_WORKER,),
    },
}
# What each v1 operator injected that Trainer v2 does not (``training-operator.md`` §4).
V1_ONLY = {
    "PyTorchJob": {"WORLD_SIZE", "PYTHONUNBUFFERED", "PET_RDZV_BACKEND", "PET_MAX_RESTARTS", "PET_RDZV_ID",
                   "PET_RDZV_CONF", "PET_STANDALONE"},
    "TFJob": {"TF_CONFIG"},
    "MPIJob": {"OMPI_MCA_plm_rsh_agent", "OMPI_MCA_orte_default_hostfile"},
    "XGBoostJob": {"WORKER_PORT", "WORKER_ADDRS", "PYTHONUNBUFFERED"},
    "PaddleJob": {"PADDLE_JOB_ID", "PADDLE_NNODES", "PADDLE_MASTER", "POD_IP_DUMMY", "PADDLE_SERVER_NUM",
                  "PADDLE_TRAINER_NUM", "PYTHONUNBUFFERED"},
    "MXJob": {"MX_CONFIG", "DMLC_PS_ROOT_PORT", "DMLC_PS_ROOT_URI", "DMLC_NUM_SERVER", "DMLC_NUM_WORKER",
              "DMLC_ROLE", "DMLC_USE_KUBERNETES", "DMLC_WORKER_ID"},
    "JAXJob": {"COORDINATOR_ADDRESS", "COORDINATOR_PORT", "PYTHONUNBUFFERED"},
}  # fmt: skip
# Names users reference that no v1 operator version set either.
NEVER_SET = {"PYTORCH_JOB_NAME": "no Training Operator version sets it; read the name from a label with a fieldRef"}
_REFERENCE = re.compile(r"\$\(([A-Z_][A-Z0-9_]*)\)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _rewrite(
    words: list[str],
    kind: str,
    path: str,
    ledger: _Ledger,
    renames: dict[str, tuple[str, ...]],
    declared: set[str],
) -> list[str]:
    """Point references to v1-only variables at the v2 variables with the same value, and report the rest.

    Variables the container declares itself keep their meaning and are left alone.
    """
    renames = {k: v for k, v in renames.items() if k not in declared}
    out = []
    for i, word in enumerate(words):

        def replace(match: re.Match[str], i: int = i) -> str:
            name = match.group(1) or match.group(2) or match.group(3)
            if name in renames:
                style = "$({})" if match.group(1) else "${{{}}}"
                new = ":".join(style.format(v) for v in renames[name])
                ledger.note(f"{path}[{i}]", f"{match.group(0)} becomes {new} (what Trainer v2 sets)", "changed")
                return new
            if name in V1_ONLY.get(kind, set()) and name not in declared:
                ledger.note(f"{path}[{i}]", f"{match.group(0)}: set by the v1 operator but not by Trainer v2", "lost")
            elif name in NEVER_SET and name not in declared:
                ledger.note(f"{path}[{i}]", f"{match.group(0)}: stays literal text, {NEVER_SET[name]}", "lost")
            return match.group(0)

        out.append(_REFERENCE.sub(replace, word))
    return out


# --- pod template split ----------------------------------------------------------------------------

# What a runtime patch may carry (``PodSpecPatch``); the rest of a pod spec needs a runtime.
PATCHABLE_POD = ("volumes", "nodeSelector", "affinity", "tolerations", "serviceAccountName", "imagePullSecrets",
                 "securityContext", "schedulingGates", "terminationGracePeriodSeconds")  # fmt: skip
# What the TrainJob's spec.trainer carries from the main container, and what a patch carries of it.
TRAINER_FIELDS = {"image": "image", "command": "command", "args": "args", "env": "env", "resources": "resourcesPerNode"}
PATCHABLE_CONTAINER = ("volumeMounts", "securityContext")


def _main_container(kind: str, containers: list[dict[str, Any]]) -> int:
    default = KINDS[kind].default_container
    for i, container in enumerate(containers):
        if container.get("name") == default:
            return i
    return 0


@dataclass
class _Split:
    trainer: dict[str, Any] = field(default_factory=dict)
    patch_pod: dict[str, Any] = field(default_factory=dict)
    patch_metadata: dict[str, Any] = field(default_factory=dict)
    patch_container: dict[str, Any] = field(default_factory=dict)
    runtime_pod: dict[str, Any] = field(default_factory=dict)  # fields only a runtime can carry
    runtime_container: dict[str, Any] = field(default_factory=dict)


def _split_template(
    kind: str,
    template: dict[str, Any],
    base: str,
    ledger: _Ledger,
    *,
    restart_policy: str | None,
    reserved: tuple[str, ...],
    renames: dict[str, tuple[str, ...]],
) -> _Split:
    split = _Split()
    metadata = template.get("metadata") or {}
    for key in ("labels", "annotations"):
        if metadata.get(key):
            split.patch_metadata[key] = dict(metadata[key])
            ledger.claim(f"{base}.metadata.{key}", f"spec.runtimePatches[0] pod template metadata.{key}")
    for key in metadata:
        if key not in ("labels", "annotations"):
            ledger.claim(
                f"{base}.metadata.{key}", "left out: a pod template's metadata only uses labels and annotations", "lost"
            )
    pod = template.get("spec") or {}
    containers = pod.get("containers") or []
    main = _main_container(kind, containers) if containers else None
    for key, value in pod.items():
        path = f"{base}.spec.{key}"
        if key == "containers":
            continue
        if key in PATCHABLE_POD:
            split.patch_pod[key] = copy.deepcopy(value)
            ledger.claim(path, f"spec.runtimePatches[0] (pod spec {key})")
        else:
            split.runtime_pod[key] = copy.deepcopy(value)
            ledger.claim(path, f"the generated TrainingRuntime (a runtime patch cannot carry pod {key})")
    if restart_policy not in (None, "OnFailure"):
        split.runtime_pod["restartPolicy"] = restart_policy  # JobSet's default is OnFailure
    for i, container in enumerate(containers):
        cpath = f"{base}.spec.containers[{i}]"
        if i != main:
            split.runtime_pod.setdefault("containers", []).append(copy.deepcopy(container))
            ledger.claim(cpath, "the generated TrainingRuntime (extra container, kept as is)")
            continue
        ledger.claim(f"{cpath}.name", f'renamed "{c.NODE}": Trainer v2 runs the trainer in container "node"', "changed")
        for key, value in container.items():
            path = f"{cpath}.{key}"
            if key == "name":
                continue
            if key in ("command", "args"):
                declared = {str(env.get("name")) for env in container.get("env") or []}
                split.trainer[key] = _rewrite(list(value), kind, path, ledger, renames, declared)
                ledger.claim(path, f"spec.trainer.{key}")
            elif key == "env":
                kept = []
                for j, env in enumerate(value or []):
                    if env.get("name") in reserved:
                        ledger.claim(
                            f"{path}[{j}]", f"left out: {env.get('name')} is set by Trainer v2 and reserved", "lost"
                        )
                    else:
                        kept.append(copy.deepcopy(env))
                        ledger.claim(f"{path}[{j}]", "spec.trainer.env", quiet=True)
                if kept:
                    split.trainer["env"] = kept
                    ledger.note(path, "spec.trainer.env", "mapped")
            elif key in TRAINER_FIELDS:
                split.trainer[TRAINER_FIELDS[key]] = copy.deepcopy(value)
                ledger.claim(path, f"spec.trainer.{TRAINER_FIELDS[key]}")
            elif key in PATCHABLE_CONTAINER:
                split.patch_container[key] = copy.deepcopy(value)
                ledger.claim(path, f"spec.runtimePatches[0] (container node {key})")
            elif (key == "imagePullPolicy" and value == _default_pull_policy(str(container.get("image", "")))) or (
                key == "imagePullPolicy" and value == _default_pull_policy(str(container.get("image", "")))
            ):
                ledger.claim(path, f"left out: {value} is what Kubernetes defaults to for this image", "changed")
            elif key == "ports" and _only_default_port(kind, value):
                ledger.claim(path, f"left out: Trainer v2 opens port {c.CONTAINER_TRAINER_PORT} itself", "changed")
            else:
                split.runtime_container[key] = copy.deepcopy(value)
                ledger.claim(path, f"the generated TrainingRuntime (a runtime patch cannot carry container {key})")
    return split


def _default_pull_policy(image: str) -> str:
    """Kubernetes' default: Always for ``:latest`` or untagged images, IfNotPresent otherwise."""
    if "@" in image:
        return "IfNotPresent"
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _only_default_port(kind: str, ports: list[dict[str, Any]]) -> bool:
    info = KINDS[kind]
    return all(p.get("name") == info.default_port_name for p in ports or [])


def _same_templates(primary: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """Paths where two replica templates differ."""
    a, b = _flat(primary, ""), _flat(other, "")
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def _flat(value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{path}.{key}" if path else key).items()}
    if isinstance(value, list) and value:
        return {k: v for i, item in enumerate(value) for k, v in _flat(item, f"{path}[{i}]").items()}
    return {path: value}


# --- the kinds -----------------------------------------------------------------------------------

PLUGIN_RUNTIMES = {"PyTorchJob": "torch-distributed", "JAXJob": "jax-distributed", "XGBoostJob": "xgboost-distributed"}
PRIMARY = {"PyTorchJob": "Master", "XGBoostJob": "Master", "JAXJob": "Worker", "TFJob": "Chief", "PaddleJob": "Master",
           "MXJob": "Scheduler"}  # fmt: skip
RESERVED = {"PyTorchJob": c.TORCH_RESERVED_ENV, "XGBoostJob": c.XGBOOST_RESERVED_ENV, "MPIJob": c.MPI_RESERVED_ENV}


def _default_runtime(name: str) -> dict[str, Any]:
    document = default_runtime_document(name, install_overlay=False)
    if document is None:  # pragma: no cover - the bundled runtimes are fixed
        raise KeyError(name)
    return document


def migrate(job: dict[str, Any]) -> Migration:
    """The Trainer v2 equivalent of a v1 training job (a dict that passed the v1 schema check)."""
    kind = str(job.get("kind"))
    ledger = _Ledger(job)
    ledger.claim("apiVersion", f"{c.API_VERSION} TrainJob", quiet=True)
    ledger.claim("kind", f"{c.API_VERSION} TrainJob", quiet=True)
    metadata = job.get("metadata") or {}
    name = str(metadata.get("name", ""))
    trainjob: dict[str, Any] = {"apiVersion": c.API_VERSION, "kind": c.TRAINJOB, "metadata": {"name": name}}
    ledger.claim("metadata.name", "metadata.name", quiet=True)
    if metadata.get("namespace"):
        trainjob["metadata"]["namespace"] = metadata["namespace"]
        ledger.claim("metadata.namespace", "metadata.namespace", quiet=True)
    for key in ("labels", "annotations"):
        if metadata.get(key):
            trainjob["metadata"][key] = dict(metadata[key])
            ledger.claim(
                f"metadata.{key}",
                f"TrainJob metadata.{key} (Trainer v2 does not copy them to the JobSet or pods)",
                "changed",
            )
    for key in metadata:
        if key not in ("name", "namespace", "labels", "annotations"):
            ledger.claim(f"metadata.{key}", "left out: set by the API server", "lost")
    ledger.claim("status", "left out: a new object starts without status", "lost")
    spec = job.get("spec") or {}
    field_name = KINDS[kind].replica_specs_field
    trainjob_spec: dict[str, Any] = {}
    trainjob["spec"] = trainjob_spec
    _run_policy(spec, trainjob_spec, ledger)
    translate = TRANSLATORS.get(kind, _plain_kind)
    runtime = translate(kind, job, trainjob_spec, ledger)
    for key in spec:
        if key not in (field_name, "runPolicy"):
            _spec_extra(kind, key, spec[key], trainjob_spec, ledger)
    if runtime is not None:
        if metadata.get("namespace"):
            runtime["metadata"]["namespace"] = metadata["namespace"]
        trainjob_spec["runtimeRef"] = {"name": runtime["metadata"]["name"], "kind": c.TRAINING_RUNTIME}
    trainjob["spec"] = {"runtimeRef": trainjob_spec.pop("runtimeRef"), **trainjob_spec}
    ledger.sweep()
    return Migration(job, trainjob, runtime, ledger.findings)


def _run_policy(spec: dict[str, Any], out: dict[str, Any], ledger: _Ledger) -> None:
    policy = spec.get("runPolicy") or {}
    base = "spec.runPolicy"
    for key, value in policy.items():
        path = f"{base}.{key}"
        if key == "activeDeadlineSeconds":
            out["activeDeadlineSeconds"] = value
            ledger.claim(path, "spec.activeDeadlineSeconds")
        elif key == "suspend":
            if value:
                out["suspend"] = True
            ledger.claim(path, "spec.suspend")
        elif key == "managedBy":
            if value == "kueue.x-k8s.io/multikueue":
                out["managedBy"] = value
                ledger.claim(path, "spec.managedBy")
            else:
                ledger.claim(
                    path, f"left out: Trainer v2's own controller ({c.MANAGED_BY_CONTROLLER}) manages it", "changed"
                )
        elif key == "cleanPodPolicy":
            ledger.claim(path, _CLEAN_POD_POLICY, "lost")
        elif key == "ttlSecondsAfterFinished":
            ledger.claim(
                path, "left out: no TrainJob field; set ttlSecondsAfterFinished in a runtime's JobSet template", "lost"
            )
        elif key == "backoffLimit":
            ledger.claim(
                path,
                "left out: restarts are the runtime's business (Job backoffLimit, default 6, and JobSet "
                "failurePolicy.maxRestarts)",
                "lost",
            )
        elif key == "schedulingPolicy":
            ledger.claim(
                path, "left out: gang scheduling is the runtime's podGroupPolicy (coscheduling or volcano)", "lost"
            )


_CLEAN_POD_POLICY = (
    "left out: Trainer v2 has no cleanPodPolicy; when the job finishes JobSet deletes the Jobs still running and "
    "keeps finished pods (and their logs) until the TrainJob is deleted"
)


def _nproc_per_node(value: Any, path: str, out: dict[str, Any], ledger: _Ledger) -> None:
    if str(value).isdigit():
        out.setdefault("trainer", {})["numProcPerNode"] = int(value)
        ledger.claim(path, "spec.trainer.numProcPerNode")
    else:
        ledger.claim(
            path,
            f'left out: "{value}" is not a number; Trainer v2 derives PET_NPROC_PER_NODE from resourcesPerNode '
            '("auto" with GPUs, else the CPU count)',
            "changed",
        )


# Kind-specific spec fields besides the replica map and runPolicy: (message, finding kind) or a handler.
SPEC_FIELDS: dict[tuple[str, str], tuple[str, Kind] | Any] = {
    ("PyTorchJob", "nprocPerNode"): _nproc_per_node,
    ("PyTorchJob", "elasticPolicy"): (
        "left out: Trainer v2.3 has no elastic training (min/max replicas, rendezvous settings, HPA metrics)",
        "lost",
    ),
    ("PaddleJob", "elasticPolicy"): ("left out: Trainer v2.3 has no elastic training", "lost"),
    ("MPIJob", "slotsPerWorker"): ("the generated TrainingRuntime (mlPolicy.mpi.numProcPerNode)", "mapped"),
    ("MPIJob", "mainContainer"): ('renamed: the main container is "node" in Trainer v2', "changed"),
    ("MPIJob", "cleanPodPolicy"): (None, "lost"),
    ("TFJob", "successPolicy"): (
        "left out: no Trainer v2 equivalent (JobSet's successPolicy lives in the runtime)",
        "lost",
    ),
    ("TFJob", "enableDynamicWorker"): ("left out: no Trainer v2 equivalent", "lost"),
    ("MXJob", "jobMode"): ("left out: MXNet's job modes have no Trainer v2 equivalent", "lost"),
}


def _spec_extra(kind: str, key: str, value: Any, out: dict[str, Any], ledger: _Ledger) -> None:
    path = f"spec.{key}"
    rule = SPEC_FIELDS.get((kind, key))
    if key == "cleanPodPolicy":
        where = "" if rule else " (and spec.cleanPodPolicy is not a v1 field: runPolicy.cleanPodPolicy is)"
        ledger.claim(path, _CLEAN_POD_POLICY + where, "lost")
    elif callable(rule):
        rule(value, path, out, ledger)
    elif rule is not None:
        ledger.claim(path, rule[0], rule[1])


def _numbers(replicas: dict[str, Any], types: tuple[str, ...]) -> int:
    return sum(int((replicas.get(t) or {}).get("replicas", 1)) for t in types if t in replicas)


def _plugin_kind(kind: str, job: dict[str, Any], out: dict[str, Any], ledger: _Ledger) -> dict[str, Any] | None:
    spec = job.get("spec") or {}
    field_name = KINDS[kind].replica_specs_field
    replicas: dict[str, Any] = spec.get(field_name) or {}
    primary_type = PRIMARY[kind] if PRIMARY[kind] in replicas else next(iter(replicas), None)
    runtime_name = PLUGIN_RUNTIMES[kind]
    out["runtimeRef"] = {"name": runtime_name}
    trainer: dict[str, Any] = out.setdefault("trainer", {})
    nodes = _numbers(replicas, tuple(replicas))
    trainer["numNodes"] = nodes
    if primary_type is None:
        return None
    base = f"spec.{field_name}[{primary_type}]"
    primary = replicas[primary_type]
    for rtype, rspec in replicas.items():
        rbase = f"spec.{field_name}[{rtype}]"
        ledger.claim(f"{rbase}.replicas", f"spec.trainer.numNodes = {nodes} (all replica types together)")
        policy = rspec.get("restartPolicy")
        if policy is not None:
            message = (
                "same as JobSet's default (OnFailure)"
                if policy == "OnFailure"
                else f"{policy}: the generated TrainingRuntime's pod restartPolicy (JobSet defaults to OnFailure)"
            )
            ledger.claim(f"{rbase}.restartPolicy", message, "mapped" if policy == "OnFailure" else "changed")
        if rtype == primary_type:
            continue
        differences = _same_templates(primary.get("template") or {}, rspec.get("template") or {})
        if differences:
            ledger.claim(
                f"{rbase}.template",
                f"left out: every node of a TrainJob runs one pod template ({primary_type}'s); {rtype} differs at "
                + ", ".join(differences),
                "lost",
            )
        else:
            ledger.claim(f"{rbase}.template", f"same pod template as {primary_type}: one template for every node")
    restart = primary.get("restartPolicy")
    renames = dict(RENAMES.get(kind, {}))
    nproc = str(spec.get("nprocPerNode", ""))
    if kind == "PyTorchJob" and (not nproc.isdigit() or nproc == "1"):
        renames["WORLD_SIZE"] = (c.TORCH_ENV_NUM_NODES,)  # v1: nodes x nprocPerNode, i.e. nodes here
    split = _split_template(
        kind,
        primary.get("template") or {},
        f"{base}.template",
        ledger,
        restart_policy=restart,
        reserved=RESERVED.get(kind, ()),
        renames=renames,
    )
    trainer.update(split.trainer)
    if kind == "PyTorchJob" and "Master" not in replicas:
        ledger.note(
            f"spec.{field_name}",
            "no Master: the v1 operator set no MASTER_ADDR/RANK/WORLD_SIZE here; Trainer v2 always sets PET_* "
            f"for torchrun with node 0 as master ({c.TORCH_ENV_MASTER_ADDR})",
            "changed",
        )
    if kind == "PyTorchJob" and not _uses_torchrun(trainer):
        ledger.note(
            "spec.trainer.command",
            "does not start torchrun: Trainer v2 sets only PET_* (torchrun's flags), not RANK/WORLD_SIZE/MASTER_ADDR",
            "changed",
        )
    patch = _runtime_patch(split)
    if patch is not None:
        out["runtimePatches"] = [patch]
    if not split.runtime_pod and not split.runtime_container:
        return None
    runtime = _default_runtime(runtime_name)
    runtime["kind"] = c.TRAINING_RUNTIME
    runtime["metadata"] = {"name": f"{job['metadata']['name']}-{runtime_name}", "labels": runtime["metadata"]["labels"]}
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    node = pod["containers"][0]
    node.update(split.runtime_container)
    extra = split.runtime_pod.pop("containers", [])
    pod.update(split.runtime_pod)
    pod["containers"] = [node, *extra]
    return runtime


def _uses_torchrun(trainer: dict[str, Any]) -> bool:
    text = " ".join([*trainer.get("command", []), *trainer.get("args", [])])
    return "torchrun" in text or "torch.distributed.run" in text


def _runtime_patch(split: _Split) -> dict[str, Any] | None:
    pod: dict[str, Any] = dict(split.patch_pod)
    if split.patch_container:
        pod["containers"] = [{"name": c.NODE, **split.patch_container}]
    template: dict[str, Any] = {}
    if split.patch_metadata:
        template["metadata"] = split.patch_metadata
    if pod:
        template["spec"] = pod
    if not template:
        return None
    job = {"name": c.NODE, "template": {"spec": {"template": template}}}
    return {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}


def _renamed_pod(kind: str, template: dict[str, Any], main: str | None = None) -> dict[str, Any]:
    out = copy.deepcopy(template)
    containers = (out.get("spec") or {}).get("containers") or []
    if containers:
        named = [i for i, ct in enumerate(containers) if main is not None and ct.get("name") == main]
        containers[named[0] if named else _main_container(kind, containers)]["name"] = c.NODE
    return out


def _plain_kind(kind: str, job: dict[str, Any], out: dict[str, Any], ledger: _Ledger) -> dict[str, Any]:
    """TFJob, PaddleJob, MXJob: a generated runtime without mlPolicy plugin (PlainML)."""
    spec = job.get("spec") or {}
    field_name = KINDS[kind].replica_specs_field
    replicas: dict[str, Any] = spec.get(field_name) or {}
    worker = "Worker" if "Worker" in replicas else next(iter(replicas), "Worker")
    base = f"spec.{field_name}[{worker}]"
    nodes = int((replicas.get(worker) or {}).get("replicas", 1))
    out["trainer"] = {"numNodes": nodes}
    template = (replicas.get(worker) or {}).get("template") or {}
    name = f"{job['metadata']['name']}-{kind.lower().removesuffix('job')}"
    runtime = _runtime_skeleton(name, kind.lower().removesuffix("job"), {"numNodes": nodes})
    job_template = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]
    job_template["spec"] = {"template": _renamed_pod(kind, template)}
    restart = (replicas.get(worker) or {}).get("restartPolicy")
    if restart is not None:
        job_template["spec"]["template"].setdefault("spec", {})["restartPolicy"] = restart
        ledger.claim(f"{base}.restartPolicy", "the generated TrainingRuntime's pod restartPolicy")
    ledger.claim(f"{base}.replicas", "spec.trainer.numNodes")
    ledger.claim(f"{base}.template", f'the generated TrainingRuntime {name} (main container renamed "node")', "changed")
    for rtype in replicas:
        if rtype == worker:
            continue
        what = {
            "PS": "parameter servers: a TrainJob has one kind of node, so TF's PS topology cannot be carried",
            "Chief": "a TrainJob has one kind of node: the chief's role falls to node 0",
            "Master": "a TrainJob has one kind of node: the master's role falls to node 0",
        }.get(rtype, f"a TrainJob has one kind of node; {rtype} replicas cannot be carried")
        ledger.claim(f"spec.{field_name}[{rtype}]", f"left out: {what}", "lost")
    missing = ", ".join(sorted(V1_ONLY.get(kind, set())))
    ledger.note(
        "",
        f"Trainer v2 has no {kind} plugin: the environment the v1 operator injected ({missing}) is not set; "
        "the program must find its peers itself (node index: JOB_COMPLETION_INDEX; node 0: "
        f"{job['metadata']['name']}-node-0-0.{job['metadata']['name']})",
        "lost",
    )
    for i, word in enumerate(_words(template)):
        for match in _REFERENCE.finditer(word):
            name_ = match.group(1) or match.group(2) or match.group(3)
            if name_ in V1_ONLY.get(kind, set()):
                ledger.note(f"{base}.template (command/args word {i})", f"${name_} will be empty or literal", "lost")
    return runtime


def _words(template: dict[str, Any]) -> list[str]:
    words: list[str] = []
    for container in (template.get("spec") or {}).get("containers") or []:
        words += [*(container.get("command") or []), *(container.get("args") or [])]
    return words


def _runtime_skeleton(name: str, framework: str, ml_policy: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.TRAINING_RUNTIME,
        "metadata": {"name": name, "labels": {c.LABEL_FRAMEWORK: framework}},
        "spec": {
            "mlPolicy": ml_policy,
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": c.NODE, "template": {"metadata": {"labels": {c.LABEL_ANCESTOR: c.ANCESTOR_TRAINER}}}}
                    ]
                }
            },
        },
    }


def _mpi(kind: str, job: dict[str, Any], out: dict[str, Any], ledger: _Ledger) -> dict[str, Any]:
    spec = job.get("spec") or {}
    replicas: dict[str, Any] = spec.get("mpiReplicaSpecs") or {}
    launcher = replicas.get("Launcher") or {}
    worker = replicas.get("Worker") or {}
    workers = int(worker.get("replicas", 1)) if worker else 0
    out["trainer"] = {"numNodes": max(workers, 1)}
    name = f"{job['metadata']['name']}-mpi"
    policy = {"numNodes": 1, "mpi": {"numProcPerNode": int(spec.get("slotsPerWorker", 1)), "mpiImplementation": c.OPENMPI,
                                     "sshAuthMountPath": "/root/.ssh", "runLauncherAsNode": False}}  # fmt: skip
    runtime = _runtime_skeleton(name, "mpi", policy)
    main = spec.get("mainContainer")
    launcher_pod = _renamed_pod(kind, launcher.get("template") or {}, main)
    worker_pod = _renamed_pod(kind, worker.get("template") or {}, main)
    for pod, rspec in ((launcher_pod, launcher), (worker_pod, worker)):
        if rspec.get("restartPolicy") is not None:
            pod.setdefault("spec", {})["restartPolicy"] = rspec["restartPolicy"]
    runtime["spec"]["template"]["spec"] = {
        "network": {"publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": [c.LAUNCHER]},
        "replicatedJobs": [
            {"name": c.NODE, "template": {"spec": {"template": worker_pod}}},
            {
                "name": c.LAUNCHER,
                "dependsOn": [{"name": c.NODE, "status": "Ready"}],
                "template": {
                    "metadata": {"labels": {c.LABEL_ANCESTOR: c.ANCESTOR_TRAINER}},
                    "spec": {"template": launcher_pod},
                },
            },
        ],
    }
    ledger.claim("spec.mpiReplicaSpecs[Worker].replicas", "spec.trainer.numNodes (the MPI node pods)")
    ledger.claim("spec.mpiReplicaSpecs[Launcher].replicas", "the launcher job (always 1)")
    for rtype, job_name in (("Launcher", c.LAUNCHER), ("Worker", c.NODE)):
        ledger.claim(f"spec.mpiReplicaSpecs[{rtype}].restartPolicy", f"the generated TrainingRuntime ({job_name} pods)")
        ledger.claim(
            f"spec.mpiReplicaSpecs[{rtype}].template",
            f'the generated TrainingRuntime {name}, replicatedJob "{job_name}" (main container renamed "node")',
            "changed",
        )
    for rtype in replicas:
        if rtype not in ("Launcher", "Worker"):
            ledger.claim(f"spec.mpiReplicaSpecs[{rtype}]", "left out: not an MPIJob replica type", "lost")
    ledger.note(
        "spec.mpiReplicaSpecs[Worker]",
        "Trainer v2 reaches MPI workers over SSH (keys in Secret <job>-mpi-ssh-auth at /root/.ssh): the node "
        "containers must run sshd (the deepspeed/mlx runtimes run /usr/sbin/sshd -De); the v1 kubectl-exec agent "
        "(OMPI_MCA_plm_rsh_agent) is gone",
        "changed",
    )
    return runtime


Translator = Callable[[str, dict[str, Any], dict[str, Any], _Ledger], "dict[str, Any] | None"]
# How each kind becomes a TrainJob (+ runtime); kinds not listed get a plain generated runtime.
TRANSLATORS: dict[str, Translator] = {"MPIJob": _mpi, **dict.fromkeys(PLUGIN_RUNTIMES, _plugin_kind)}
