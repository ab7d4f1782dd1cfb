"""``airflow-training migrate --check``: run the v1 job and its migrated TrainJob side by side on a
temporary embedded control plane and compare what their replicas saw.

The main container's command of both is replaced by a probe that prints the distributed view a
training script gets, each kind where its operator puts it (:data:`VIEWS`): the node count and each
node's rank (PyTorchJob ``WORLD_SIZE``/``RANK`` against torch's ``PET_NNODES``/``PET_NODE_RANK``;
JAXJob ``NUM_PROCESSES``/``PROCESS_ID`` against ``JAX_*``; XGBoostJob ``WORLD_SIZE``/``RANK``
against ``DMLC_*``; MPIJob: the launcher's hostfile, its hosts and slots), the processes per node,
and the user's own environment variables (names and values, minus what either operator injects), so
the check runs in seconds whatever the real training does. MPI workers wait instead of running
their command (``mpirun`` on the launcher is what would reach them). Differences are printed; exit
status 1 if there are any.

TFJob, PaddleJob and MXJob are not run: Trainer v2 has no plugin for them, so their replicas would
miss what the v1 operator told them about each other (``TF_CONFIG``, ``PADDLE_*``, ``MX_CONFIG``);
the check says so, naming the replica field, and counts it as a difference.
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_training.frameworks.trainer.migrate import RENAMES, V1_ONLY
from airflow_provider_training.specs.kinds import KINDS
from airflow_provider_training.specs.trainer import constants as c

PROBE = (
    "import json, os; f = os.environ.get('OMPI_MCA_orte_default_hostfile'); "
    "h = open(f).read() if f and os.path.isfile(f) else None; "
    "print('MIGRATE-CHECK ' + json.dumps({'env': dict(os.environ), 'hostfile': h}), flush=True)"
)
WAIT = "import time; time.sleep(3600)"  # an MPI worker: stopped with the control plane
# What the node adds to every process, and what any operator injects whatever the kind.
INJECTED_PREFIXES = ("KUBERNETES_", "JOB_COMPLETION_INDEX", "PYTHON", "KUBEFLOW_TRAINER_SERVER_")
INJECTED = {"HOSTNAME", "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SHELL",
            "PWD", "SHLVL", "_"}  # fmt: skip
NAMESPACE = "migrate-check"


@dataclass(frozen=True)
class View:
    """Where one kind's replicas read the distributed view in v1 and in its Trainer v2 plugin, and
    which of them print it."""

    injected: tuple[str, ...]  # env names and prefixes the two operators set, besides nodes and rank
    nodes: tuple[str, str] = ("", "")  # env names, (v1, v2)
    rank: tuple[str, str] = ("", "")
    nproc: str | None = None  # the v2 env name of processes per node (v1: the same name, default 1)
    # Launcher/workers kinds: the hostfile is the view (hosts, slots; ranks are mpirun's to give),
    # only the launcher prints it (v1 replica type, v2 replicatedJob), the workers wait; the v1
    # spec field that names the main container.
    launcher: tuple[str, str] | None = None
    main_container_field: str | None = None


VIEWS = {
    "PyTorchJob": View(("PET_", "MASTER_"), ("WORLD_SIZE", c.TORCH_ENV_NUM_NODES), ("RANK", c.TORCH_ENV_NODE_RANK),
                       c.TORCH_ENV_NUM_PROC_PER_NODE),
    "JAXJob": View(("JAX_",), ("NUM_PROCESSES", c.JAX_ENV_NUM_PROCESSES), ("PROCESS_ID", c.JAX_ENV_PROCESS_ID)),
    "XGBoostJob": View(("MASTER_", "DMLC_"), ("WORLD_SIZE", c.XGBOOST_ENV_NUM_WORKER), ("RANK", c.XGBOOST_ENV_TASK_ID)),
    # TRAINJOB_NAMESPACE: the embedded node's rsh agent
    "MPIJob": View(("OMPI_", "I_MPI_", "NVIDIA_", "TRAINJOB_NAMESPACE"), launcher=("Launcher", c.LAUNCHER),
                   main_container_field="mainContainer"),
}  # fmt: skip
# Kinds without a Trainer v2 plugin: what their replicas would miss.
NO_PLUGIN = {"TFJob": "TensorFlow", "PaddleJob": "PaddlePaddle", "MXJob": "MXNet"}


def _probe(containers: list[dict[str, Any]], main: str | None, command: str = PROBE) -> None:
    for container in containers:
        if main is None or container.get("name") == main:
            container["command"] = [sys.executable, "-c", command]
            container.pop("args", None)
            return


def _view(kind: str, seen: dict[str, Any], v2: bool) -> dict[str, Any]:
    env: dict[str, str] = seen["env"]
    view = VIEWS[kind]
    side = 1 if v2 else 0
    injected = {*INJECTED, *V1_ONLY.get(kind, ()), *RENAMES.get(kind, {}), view.nodes[side], view.rank[side]}
    prefixes = (*INJECTED_PREFIXES, *view.injected)
    user = {k: v for k, v in env.items() if k not in injected and not k.startswith(prefixes)}
    if view.launcher is not None:
        hosts = [line.split() for line in (seen.get("hostfile") or "").splitlines() if line.strip()]
        slots = {word for host in hosts for word in host[1:] if word.startswith("slots=")}
        return {"nodes": len(hosts), "rank": None, "nproc": ", ".join(sorted(slots)) or "none", "env": user}
    nproc = env.get(view.nproc, "1") if view.nproc else "1"
    return {"nodes": env.get(view.nodes[side]), "rank": env.get(view.rank[side]), "nproc": nproc, "env": user}


def _wait(get: Any, condition: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obj: dict[str, Any] = get()
        conditions = (obj.get("status") or {}).get("conditions") or []
        if any(c["type"] in (condition, "Failed") and c["status"] == "True" for c in conditions):
            return obj
        time.sleep(0.2)
    raise TimeoutError(f"no {condition} within {timeout:.0f} s")


def _seen(core: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
    views = []
    for pod in core.list_namespaced_pod(namespace, label_selector=selector).items:
        text = core.read_namespaced_pod_log(pod.metadata.name, namespace, _preload_content=False).data.decode()
        for line in text.splitlines():
            if line.startswith("MIGRATE-CHECK "):
                views.append(json.loads(line[len("MIGRATE-CHECK ") :]))
    return views


def not_runnable(v1: dict[str, Any]) -> list[str] | None:
    """Why ``v1`` cannot be checked (report lines), or None when it can."""
    kind = str(v1.get("kind"))
    if kind in VIEWS:
        return None
    name = (v1.get("metadata") or {}).get("name")
    field = f"spec.{KINDS[kind].replica_specs_field}" if kind in KINDS else "kind"
    missing = ", ".join(sorted(set(V1_ONLY.get(kind, ())) - {"PYTHONUNBUFFERED"})) or "its cluster description"
    framework = NO_PLUGIN.get(kind, kind)
    return [
        f"# check: {kind} {name} not run: Trainer v2.3.0 has no {framework} plugin, so the replicas of {field} "
        f"would not get what the v1 operator tells them about each other ({missing}); no TrainJob behaves the "
        "same  <- DIFFERENT"
    ]


class Checker:
    """One temporary control plane for every document of a ``migrate --check`` run; each document
    in a namespace of its own (a PyTorchJob and a JAXJob of one name both become TrainJob <name>)."""

    def __init__(self, core: Any, custom: Any, timeout: float) -> None:
        self.core, self.custom, self.timeout = core, custom, timeout
        self.count = 0

    def check(self, v1: dict[str, Any], v2_documents: list[dict[str, Any]]) -> tuple[bool, list[str]]:
        """Run both; (same?, report lines)."""
        kind = str(v1["kind"])
        info = KINDS[kind]
        self.count += 1
        namespace = f"{NAMESPACE}-{self.count}"
        v1 = copy.deepcopy(v1)
        v1["metadata"] = {"name": v1["metadata"]["name"], "namespace": namespace}
        view = VIEWS[kind]
        # a launcher's operator injects into its first container unless the spec names one
        field = view.main_container_field
        main = v1["spec"].get(field) if field else info.default_container
        for rtype, spec in v1["spec"][info.replica_specs_field].items():
            containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
            prints = view.launcher is None or rtype == view.launcher[0]
            _probe(containers, main, PROBE if prints else WAIT)
        documents = copy.deepcopy(v2_documents)
        for doc in documents:
            doc["metadata"] = {**doc["metadata"], "namespace": namespace}
            if doc["kind"] == c.TRAINING_RUNTIME and view.launcher is not None:
                for job in doc["spec"]["template"]["spec"]["replicatedJobs"]:
                    pod = job["template"]["spec"]["template"].get("spec") or {}
                    _probe(pod.get("containers") or [], c.NODE, PROBE if job["name"] == view.launcher[1] else WAIT)
            elif doc["kind"] == c.TRAINJOB and view.launcher is None:
                trainer = doc["spec"].setdefault("trainer", {})
                trainer["command"], trainer["args"] = [sys.executable, "-c", PROBE], []
        self.core.create_namespace({"metadata": {"name": namespace}})
        self.custom.create_namespaced_custom_object("kubeflow.org", "v1", namespace, info.plural, v1)
        trainjob = ""
        for doc in documents:
            plural = {c.TRAINJOB: "trainjobs", c.TRAINING_RUNTIME: "trainingruntimes"}[doc["kind"]]
            self.custom.create_namespaced_custom_object(c.GROUP, c.VERSION, namespace, plural, doc)
            trainjob = doc["metadata"]["name"] if doc["kind"] == c.TRAINJOB else trainjob
        name = v1["metadata"]["name"]
        try:
            done1 = _wait(
                lambda: self.custom.get_namespaced_custom_object("kubeflow.org", "v1", namespace, info.plural, name),
                "Succeeded",
                self.timeout,
            )
            done2 = _wait(
                lambda: self.custom.get_namespaced_custom_object(c.GROUP, c.VERSION, namespace, "trainjobs", trainjob),
                "Complete",
                self.timeout,
            )
        except TimeoutError as exc:
            return False, [f"# check: v1 {name} / v2 {trainjob}: {exc}  <- DIFFERENT"]
        seen1 = [_view(kind, s, False) for s in _seen(self.core, namespace, f"training.kubeflow.org/job-name={name}")]
        seen2 = [
            _view(kind, s, True) for s in _seen(self.core, namespace, f"jobset.sigs.k8s.io/jobset-name={trainjob}")
        ]
        return _compare(kind, f"v1 {name}: {_state(done1)}; v2 {trainjob}: {_state(done2)}", seen1, seen2)


def _compare(
    kind: str, states: str, seen1: list[dict[str, Any]], seen2: list[dict[str, Any]]
) -> tuple[bool, list[str]]:
    lines = [f"# check: {states}"]
    same = True
    facts: tuple[tuple[str, str], ...] = (("nodes", "nodes"), ("ranks", "rank"), ("processes per node", "nproc"))
    hostfile = VIEWS[kind].launcher is not None
    if hostfile:  # ranks are mpirun's to give
        facts = (("hosts in the launcher's hostfile", "nodes"), ("slots per host", "nproc"))
    for label, key in facts:
        a = sorted(str(v[key]) for v in seen1) if key == "rank" else sorted({str(v[key]) for v in seen1})
        b = sorted(str(v[key]) for v in seen2) if key == "rank" else sorted({str(v[key]) for v in seen2})
        ok = a == b and bool(a)
        same &= ok
        lines.append(
            f"# check: {label}: v1 {', '.join(a) or 'none'}; v2 {', '.join(b) or 'none'}{'' if ok else '  <- DIFFERENT'}"
        )
    env1 = {k: v for view in seen1 for k, v in view["env"].items()}
    env2 = {k: v for view in seen2 for k, v in view["env"].items()}
    for key in sorted(set(env1) | set(env2)):
        if env1.get(key) != env2.get(key):
            same = False
            where = "v1 only" if key not in env2 else "v2 only" if key not in env1 else "values differ"
            lines.append(f"# check: env {key}: {where}  <- DIFFERENT")
    if same:
        what = "launcher saw the same hosts, slots" if hostfile else "replicas saw the same nodes, ranks"
        lines.append(f"# check: the {what} and environment ({len(env1)} variables of yours)")
    return same, lines


@contextmanager
def checker(*, timeout: float = 300) -> Iterator[Checker]:
    """A :class:`Checker` on a fresh embedded control plane, stopped (with every replica) and
    removed at the end."""
    from kubernetes import client, config

    from airflow_provider_training.embedded import start, stop

    home = Path(tempfile.mkdtemp(prefix="migrate-check-"))
    try:
        plane = start(home)
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
        api = client.ApiClient(configuration)
        yield Checker(client.CoreV1Api(api), client.CustomObjectsApi(api), timeout)
    finally:
        stop(home, replicas=True)
        shutil.rmtree(home, ignore_errors=True)


def _state(obj: dict[str, Any]) -> str:
    conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    return conditions[-1]["type"] if conditions else "unknown"
