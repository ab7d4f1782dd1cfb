"""Helpers of the TrainJob tests: documents, and waiting through the real Kubernetes client for
what a user would watch (conditions, pods, logs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.waiting import wait_for

PY = sys.executable
KUBECTL = Path(sys.executable).with_name("kubectl")
GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
PRINT_ENV = (
    "import json, os; print(json.dumps({k: v for k, v in os.environ.items() "
    "if k.startswith(('PET_', 'JAX_', 'DMLC_', 'JOB_COMPLETION', 'HOSTNAME'))}), flush=True)"
)


def trainjob(
    name: str, runtime: str = "torch-distributed", kind: str = "ClusterTrainingRuntime", **trainer: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": runtime, "kind": kind, "apiGroup": GROUP}}
    if trainer:
        spec["trainer"] = trainer
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainJob", "metadata": {"name": name}, "spec": spec}


def runtime(
    name: str, policy: dict[str, Any], *, job_spec: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    """A namespaced TrainingRuntime with one ``node`` replicatedJob running this Python."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": policy,
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {
                                    **(job_spec or {}),
                                    "template": {"spec": {"containers": [{"name": "node", "image": "python:3.11"}]}},
                                },
                            },
                        }
                    ],
                    **spec,
                }
            },
        },
    }


class TrainJobs:
    def __init__(self, api: client.ApiClient, namespace: str, kubeconfig: Path) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.namespace = namespace
        self.kubeconfig = kubeconfig

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        plural = {"TrainJob": "trainjobs", "TrainingRuntime": "trainingruntimes"}[body["kind"]]
        out: dict[str, Any] = self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, body)
        return out

    def get(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "trainjobs", name
        )
        return out

    def patch(self, name: str, body: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, "trainjobs", name, body)

    def jobset(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = self.custom.get_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", self.namespace, "jobsets", name
        )
        return out

    def pods(self, name: str) -> list[Any]:
        selector = f"jobset.sigs.k8s.io/jobset-name={name}"
        return list(self.core.list_namespaced_pod(self.namespace, label_selector=selector).items)

    def logs(self, pod: str, container: str | None = None) -> str:
        response = self.core.read_namespaced_pod_log(pod, self.namespace, _preload_content=False, container=container)
        return str(response.data.decode())

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        for c in (self.get(name).get("status") or {}).get("conditions") or []:
            if c["type"] == type_ and c["status"] == "True":
                return dict(c)
        return None

    def wait_condition(self, name: str, type_: str, timeout: float = 120) -> dict[str, Any]:
        found: list[dict[str, Any]] = []

        def check() -> bool:
            c = self.condition(name, type_)
            if c is None and type_ != "Failed" and self.condition(name, "Failed") is not None:
                raise AssertionError(f"TrainJob {name} failed: {self.get(name)['status']}")
            if c is not None:
                found.append(c)
            return c is not None

        try:
            wait_for(check, timeout, f"TrainJob {name} {type_}", interval=0.1)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.describe(name)}") from None
        return found[-1]

    def describe(self, name: str) -> str:
        """Pods, phases and log tails of a TrainJob: what a failed wait reports."""
        lines = [f"status: {self.get(name).get('status')}"]
        for pod in self.pods(name):
            lines.append(f"pod {pod.metadata.name}: {pod.status.phase}")
            try:
                lines += ["  " + line for line in self.logs(pod.metadata.name).splitlines()[-15:]]
            except Exception as exc:  # a pod that never started has no log
                lines.append(f"  (no log: {exc})")
        return "\n".join(lines)

    def kubectl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(self.kubeconfig), "-n", self.namespace, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
