"""How replica addresses and ports are rendered into injected environment and MPI files.

The operator writes cluster DNS names (``{job}-master-0``, TF's ``{job}-worker-0.{ns}.svc:2222``)
and the ports declared on the containers. :class:`ClusterAddressing` reproduces those strings.
The embedded control plane supplies its own :class:`Addressing` that maps each replica to a
loopback IP and an allocated port; every address and port a plugin emits goes through it, so the
two renderings never drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ReplicaRef:
    """One replica of one job, as the operator names it."""

    namespace: str
    job: str
    replica_type: str  # CamelCase, as in the spec map (``Master``, ``Worker``, ``PS``…)
    index: int
    # The operator's pod / Service name: ``{job}-{rtype-lower}-{i}``; MPI's launcher is ``{job}-launcher``.
    pod_name: str


class Addressing(Protocol):
    def host(self, replica: ReplicaRef) -> str:
        """Address other replicas use to reach ``replica`` (MASTER_ADDR, hostfile lines…)."""
        ...

    def service_host(self, replica: ReplicaRef) -> str:
        """The fully qualified form TF_CONFIG uses (``{pod}.{ns}.svc[.domain]`` upstream)."""
        ...

    def port(self, replica: ReplicaRef, port_name: str, declared: int) -> int:
        """Port ``replica`` listens on for the port called ``port_name`` (declared in its template)."""
        ...


@dataclass(frozen=True)
class ClusterAddressing:
    """Upstream rendering. ``cluster_domain`` is the operator's ``CUSTOM_CLUSTER_DOMAIN``."""

    cluster_domain: str = ""

    def host(self, replica: ReplicaRef) -> str:
        return replica.pod_name

    def service_host(self, replica: ReplicaRef) -> str:
        name = f"{replica.pod_name}.{replica.namespace}.svc"
        return f"{name}.{self.cluster_domain}" if self.cluster_domain else name

    def port(self, replica: ReplicaRef, port_name: str, declared: int) -> int:
        return declared
