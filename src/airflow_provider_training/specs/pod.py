"""The part of PodTemplateSpec the node agent interprets.

Only what the embedded control plane acts on is typed; any other Kubernetes field (affinity,
tolerations, securityContext, probes…) is kept verbatim through ``extra="allow"``.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_training.specs.base import KubeModel
from airflow_provider_training.specs.meta import ObjectMeta


class EnvVar(KubeModel):
    name: str
    value: str | None = None
    # fieldRef / secretKeyRef / configMapKeyRef / resourceFieldRef, resolved by the node agent.
    value_from: dict[str, Any] | None = None


class EnvFromSource(KubeModel):
    prefix: str | None = None
    config_map_ref: dict[str, Any] | None = None
    secret_ref: dict[str, Any] | None = None


class ContainerPort(KubeModel):
    container_port: int
    name: str | None = None
    protocol: str | None = None
    host_port: int | None = None


class VolumeMount(KubeModel):
    name: str
    mount_path: str
    sub_path: str | None = None
    read_only: bool | None = None


class ResourceRequirements(KubeModel):
    # Quantities are int-or-string in the API ("4", 4, "8Gi"); kept as written.
    limits: dict[str, int | str] | None = None
    requests: dict[str, int | str] | None = None


class Container(KubeModel):
    name: str
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    working_dir: str | None = None
    env: list[EnvVar] | None = None
    env_from: list[EnvFromSource] | None = None
    ports: list[ContainerPort] | None = None
    resources: ResourceRequirements | None = None
    volume_mounts: list[VolumeMount] | None = None
    image_pull_policy: str | None = None

    def port(self, name: str) -> int | None:
        for port in self.ports or []:
            if port.name == name:
                return port.container_port
        return None


class Volume(KubeModel):
    name: str
    persistent_volume_claim: dict[str, Any] | None = None
    empty_dir: dict[str, Any] | None = None
    host_path: dict[str, Any] | None = None
    config_map: dict[str, Any] | None = None
    secret: dict[str, Any] | None = None


class PodSpec(KubeModel):
    containers: list[Container] = []
    init_containers: list[Container] | None = None
    volumes: list[Volume] | None = None
    restart_policy: str | None = None
    service_account_name: str | None = None

    def container(self, name: str) -> Container | None:
        for container in self.containers:
            if container.name == name:
                return container
        return None


class PodTemplateSpec(KubeModel):
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None
