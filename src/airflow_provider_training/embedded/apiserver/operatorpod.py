"""What ``kubectl get pods -n kubeflow`` shows: a ``training-operator`` pod standing for the
controllers, as the seed's install check expects to see.

On the embedded control plane the Training Operator is not a pod but the controllers inside the
daemon, so this pod is a record, not a process: written at daemon start (Running since then,
``podIP`` 127.0.0.1, the daemon's pid in its ``containerID``), bound to the node
``embedded-control-plane`` that no node agent serves, so nothing runs or restarts it. Deleting it
removes the record until the next start. ``kubectl logs`` on it shows the daemon's log
(``<home>/daemon.log``: the controllers' lines), as the operator pod's log would; ``-f`` is not
followed (the current content is returned).
"""

from __future__ import annotations

import contextlib
import os

from starlette.requests import Request
from starlette.responses import PlainTextResponse

from airflow_provider_training.embedded import canonical
from airflow_provider_training.embedded.apiserver.context import ServerContext
from airflow_provider_training.embedded.resources import NAMESPACES, PODS
from airflow_provider_training.embedded.store import AlreadyExistsError, Store, now_timestamp
from airflow_provider_training.specs.unstructured import Unstructured

NAMESPACE = "kubeflow"
NAME = "training-operator-embedded"
NODE = "embedded-control-plane"
IMAGE = "kubeflow/training-operator:v1-embedded"
LABELS = {"control-plane": "kubeflow-training-operator", "app.kubernetes.io/component": "embedded-controllers"}


def operator_pod(started: str) -> Unstructured:
    container = {
        "name": "training-operator",
        "image": IMAGE,
        "command": ["/manager"],
        "ports": [
            {"containerPort": 8080, "name": "monitoring-port"},
            {"containerPort": 9443, "name": "webhook-server"},
        ],
    }
    pod: Unstructured = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": dict(LABELS),
            "annotations": {"training.airflow.apache.org/represents": "the embedded control plane's controllers"},
        },
        "spec": {"nodeName": NODE, "containers": [container], "automountServiceAccountToken": False},
    }
    canonical.pod(pod)
    ready = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": started}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    pod["status"].update(
        phase="Running",
        conditions=ready,
        hostIP="127.0.0.1",
        hostIPs=[{"ip": "127.0.0.1"}],
        podIP="127.0.0.1",
        podIPs=[{"ip": "127.0.0.1"}],
        startTime=started,
        containerStatuses=[
            {
                "name": "training-operator",
                "image": IMAGE,
                "imageID": "",
                "containerID": f"process://{os.getpid()}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": started}},
                "lastState": {},
            }
        ],
    )
    return pod


def ensure(store: Store) -> None:
    """Write (or refresh after a restart) the record, when the ``kubeflow`` namespace exists."""
    if store.get(NAMESPACES.key, "", NAMESPACE) is None:
        return
    pod = operator_pod(now_timestamp())
    current = store.get(PODS.key, NAMESPACE, NAME)
    if current is None:
        with contextlib.suppress(AlreadyExistsError):
            store.create(PODS.key, pod)
        return
    current["status"] = pod["status"]
    store.update(PODS.key, current, check_rv=False)


def logs(request: Request, ctx: ServerContext, namespace: str | None, name: str | None) -> PlainTextResponse | None:
    """The daemon's log for ``kubectl logs`` of this pod; None for every other pod."""
    if (namespace, name) != (NAMESPACE, NAME):
        return None
    pod = ctx.store.get(PODS.key, NAMESPACE, NAME)
    if pod is None or (pod.get("spec") or {}).get("nodeName") != NODE:
        return None
    try:
        lines = ctx.home.daemon_log.read_text(errors="replace").splitlines(keepends=True)
    except OSError:
        lines = []
    tail = request.query_params.get("tailLines")
    if tail is not None and tail.isdigit():
        lines = lines[-int(tail) :] if int(tail) else []
    return PlainTextResponse("".join(lines))
