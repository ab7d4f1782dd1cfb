"""Helpers of the controller tests: waiting for what a user would watch (conditions, pods, logs)
through the real Kubernetes client. The job documents are built by ``tests/factories.py``."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from airflow_provider_training.specs.kinds import kind_info
from tests.waiting import wait_for


class Jobs:
    """Create / read / wait on training jobs of one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.namespace = namespace

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        plural = kind_info(body["kind"]).plural
        out: dict[str, Any] = self.custom.create_namespaced_custom_object(
            "kubeflow.org", "v1", self.namespace, plural, body
        )
        return out

    def get(self, kind: str, name: str) -> dict[str, Any]:
        out: dict[str, Any] = self.custom.get_namespaced_custom_object(
            "kubeflow.org", "v1", self.namespace, kind_info(kind).plural, name
        )
        return out

    def patch(self, kind: str, name: str, body: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            "kubeflow.org", "v1", self.namespace, kind_info(kind).plural, name, body
        )

    def delete(self, kind: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object("kubeflow.org", "v1", self.namespace, kind_info(kind).plural, name)

    def wait(self, kind: str, name: str, condition: str, timeout: float = 30) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            obj = self.get(kind, name)
            for c in (obj.get("status") or {}).get("conditions") or []:
                if c["type"] == condition and c["status"] == "True":
                    return obj
            return None

        try:
            return wait_for(done, timeout, f"{kind} {name} to be {condition}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.describe(name)}") from None

    def describe(self, name: str) -> str:
        """Each pod's phase, restarts and last log lines: what a timed-out wait shows."""
        out = []
        for pod in self.pods(name):
            statuses = pod.status.container_statuses or []
            restarts = sum(s.restart_count or 0 for s in statuses)
            try:
                tail = self.logs(pod.metadata.name).splitlines()[-15:]
            except Exception as exc:  # a diagnostic: any failure to read is itself the answer
                tail = [f"(no log: {exc})"]
            out.append(f"--- {pod.metadata.name}: {pod.status.phase}, restarts {restarts}\n" + "\n".join(tail))
        return "\n".join(out)

    def pods(self, name: str) -> list[Any]:
        selector = f"training.kubeflow.org/job-name={name}"
        return sorted(
            self.core.list_namespaced_pod(self.namespace, label_selector=selector).items, key=lambda p: p.metadata.name
        )

    def pod(self, name: str) -> Any:
        return self.core.read_namespaced_pod(name, self.namespace)

    def logs(self, pod: str, previous: bool = False) -> str:
        # Raw bytes: the client would otherwise parse a JSON-looking log line into a dict.
        response = self.core.read_namespaced_pod_log(pod, self.namespace, previous=previous, _preload_content=False)
        return str(response.data.decode())

    def events(self, name: str) -> list[Any]:
        return self.core.list_namespaced_event(self.namespace, field_selector=f"involvedObject.name={name}").items


def conditions(obj: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(c["type"], c["status"], c["reason"], c["message"]) for c in obj["status"]["conditions"]]
