"""``airflow-training migrate --check``: run the v1 job and its migrated TrainJob side by side on a
temporary embedded control plane and compare what their replicas saw.

The main container's command of both is replaced by a probe that prints the distributed view a
training script gets — the node count and each node's rank (v1: ``WORLD_SIZE`` / ``RANK`` of the
PyTorchJob; v2: ``PET_NNODES`` / ``PET_NODE_RANK`` of the torch plugin), the processes per node, and
the user's own environment variables (names and values, minus what either operator injects) — so the
check runs in seconds whatever the real training does. Differences are printed; exit status 1 if
there are any. PyTorchJobs only (the v2 torch runtime); other kinds are reported as not checked.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROBE = "import json, os; print('MIGRATE-CHECK ' + json.dumps(dict(os.environ)), flush=True)"
# What the operators inject (and the node adds); the rest is the user's.
INJECTED_PREFIXES = ("PET_", "KUBERNETES_", "JOB_COMPLETION_INDEX", "MASTER_", "OMPI_", "PYTHON")
INJECTED = {
    "RANK",
    "WORLD_SIZE",
    "HOSTNAME",
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "SHELL",
    "PWD",
    "SHLVL",
    "_",
}
NAMESPACE = "migrate-check"


def _probe(containers: list[dict[str, Any]], main: str | None) -> None:
    for container in containers:
        if main is None or container.get("name") == main:
            container["command"] = [sys.executable, "-c", PROBE]
            container.pop("args", None)
            return


def _view(env: dict[str, str], v2: bool) -> dict[str, Any]:
    nodes = env.get("PET_NNODES") if v2 else env.get("WORLD_SIZE")
    rank = env.get("PET_NODE_RANK") if v2 else env.get("RANK")
    user = {k: v for k, v in env.items() if k not in INJECTED and not k.startswith(INJECTED_PREFIXES)}
    return {"nodes": nodes, "rank": rank, "nproc": env.get("PET_NPROC_PER_NODE", "1"), "env": user}


def _wait(get: Any, condition: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obj: dict[str, Any] = get()
        conditions = (obj.get("status") or {}).get("conditions") or []
        if any(c["type"] in (condition, "Failed") and c["status"] == "True" for c in conditions):
            return obj
        time.sleep(0.2)
    raise TimeoutError(f"no {condition} within {timeout:.0f} s")


def _seen(core: Any, selector: str) -> list[dict[str, Any]]:
    views = []
    for pod in core.list_namespaced_pod(NAMESPACE, label_selector=selector).items:
        text = core.read_namespaced_pod_log(pod.metadata.name, NAMESPACE, _preload_content=False).data.decode()
        for line in text.splitlines():
            if line.startswith("MIGRATE-CHECK "):
                views.append(json.loads(line[len("MIGRATE-CHECK ") :]))
    return views


def check(v1: dict[str, Any], v2_documents: list[dict[str, Any]], *, timeout: float = 300) -> tuple[bool, list[str]]:
    """Run both; (same?, report lines)."""
    from kubernetes import client, config

    from airflow_provider_training.embedded import start, stop
    from airflow_provider_training.specs.kinds import KINDS

    if v1.get("kind") != "PyTorchJob":
        return True, [f"# check: {v1.get('kind')} not checked (PyTorchJob only)"]
    v1 = copy.deepcopy(v1)
    v1["metadata"] = {"name": v1["metadata"]["name"], "namespace": NAMESPACE}
    for spec in v1["spec"]["pytorchReplicaSpecs"].values():
        _probe(spec["template"]["spec"]["containers"], KINDS["PyTorchJob"].default_container)
    documents = copy.deepcopy(v2_documents)
    for doc in documents:
        doc["metadata"] = {**doc["metadata"], "namespace": NAMESPACE}
        if doc["kind"] == "TrainJob":
            trainer = doc["spec"].setdefault("trainer", {})
            trainer["command"], trainer["args"] = [sys.executable, "-c", PROBE], []
    home = Path(tempfile.mkdtemp(prefix="migrate-check-"))
    plane = start(home)
    try:
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
        api = client.ApiClient(configuration)
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        custom.create_namespaced_custom_object("kubeflow.org", "v1", NAMESPACE, "pytorchjobs", v1)
        trainjob = ""
        for doc in documents:
            plural = {"TrainJob": "trainjobs", "TrainingRuntime": "trainingruntimes"}[doc["kind"]]
            custom.create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", NAMESPACE, plural, doc)
            trainjob = doc["metadata"]["name"] if doc["kind"] == "TrainJob" else trainjob
        name = v1["metadata"]["name"]
        done1 = _wait(
            lambda: custom.get_namespaced_custom_object("kubeflow.org", "v1", NAMESPACE, "pytorchjobs", name),
            "Succeeded",
            timeout,
        )
        done2 = _wait(
            lambda: custom.get_namespaced_custom_object(
                "trainer.kubeflow.org", "v1alpha1", NAMESPACE, "trainjobs", trainjob
            ),
            "Complete",
            timeout,
        )
        seen1 = [_view(e, False) for e in _seen(core, f"training.kubeflow.org/job-name={name}")]
        seen2 = [
            _view(e, True)
            for e in _seen(
                core, f"jobset.sigs.k8s.io/jobset-name={trainjob},jobset.sigs.k8s.io/replicatedjob-name=node"
            )
        ]
    finally:
        stop(home, replicas=True)
    lines = [f"# check: v1 {name}: {_state(done1)}; v2 {trainjob}: {_state(done2)}"]
    same = True
    for label, key in (("nodes", "nodes"), ("ranks", "rank"), ("processes per node", "nproc")):
        a = sorted({str(v[key]) for v in seen1}) if key != "rank" else sorted(str(v[key]) for v in seen1)
        b = sorted({str(v[key]) for v in seen2}) if key != "rank" else sorted(str(v[key]) for v in seen2)
        ok = a == b
        same &= ok
        lines.append(f"# check: {label}: v1 {', '.join(a)}; v2 {', '.join(b)}{'' if ok else '  <- DIFFERENT'}")
    env1 = {k: v for view in seen1 for k, v in view["env"].items()}
    env2 = {k: v for view in seen2 for k, v in view["env"].items()}
    for key in sorted(set(env1) | set(env2)):
        if env1.get(key) != env2.get(key):
            same = False
            where = "v1 only" if key not in env2 else "v2 only" if key not in env1 else "values differ"
            lines.append(f"# check: env {key}: {where}  <- DIFFERENT")
    if same:
        lines.append(
            f"# check: the replicas saw the same nodes, ranks and environment ({len(env1)} variables of yours)"
        )
    return same, lines


def _state(obj: dict[str, Any]) -> str:
    conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    return conditions[-1]["type"] if conditions else "unknown"
