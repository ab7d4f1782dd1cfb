"""Helpers of the sandbox tests: bare Pods on the session's control plane, through the real client."""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Any

from kubernetes import client

PYTHON = sys.executable


def container(code: str, **extra: Any) -> dict[str, Any]:
    return {"name": "main", "image": "python:3.11", "command": [PYTHON, "-c", code], **extra}


def create(api: Any, namespace: str, name: str, **spec: Any) -> str:
    """A Pod of ``spec`` (``containers`` defaults to one that prints ``ok``); returns its name."""
    spec.setdefault("containers", [container("print('ok')")])
    spec.setdefault("restartPolicy", "Never")
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    client.CoreV1Api(api).create_namespaced_pod(namespace, body)
    return name


def read(api: Any, namespace: str, name: str) -> Any:
    return client.CoreV1Api(api).read_namespaced_pod(name, namespace)


def wait_phase(api: Any, namespace: str, name: str, phases: tuple[str, ...], timeout: float = 40) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        pod = read(api, namespace, name)
        if pod.status.phase in phases:
            return pod
        if time.monotonic() > deadline:
            raise AssertionError(f"pod {name} is {pod.status.phase}, not {phases}: {pod.status}")
        time.sleep(0.05)


def logs(api: Any, namespace: str, name: str, container_name: str | None = None) -> str:
    kwargs = {"container": container_name} if container_name else {}
    response = client.CoreV1Api(api).read_namespaced_pod_log(name, namespace, _preload_content=False, **kwargs)
    return bytes(response.data).decode()


def last_json(text: str) -> Any:
    return json.loads(text.strip().splitlines()[-1])


def events(api: Any, namespace: str, name: str) -> list[tuple[str, str, str]]:
    items = client.CoreV1Api(api).list_namespaced_event(namespace).items
    return [(e.type, e.reason, e.message) for e in items if e.involved_object.name == name]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"
