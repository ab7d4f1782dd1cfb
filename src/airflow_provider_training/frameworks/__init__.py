"""Framework plugins and the pure building blocks of the reconcile engine.

Public names::

    from airflow_provider_training.frameworks import plugin, Addressing, ClusterAddressing
    p = plugin("PyTorchJob")
    p.injected_env(job, "Worker", 0, "pytorch")          # job already specs.with_defaults()

Nothing here does I/O: the embedded controller feeds in jobs, pod states and ``now``, and acts on
what comes back (status, events, pods to create or delete).
"""

from __future__ import annotations

from airflow_provider_training.frameworks.addressing import Addressing, ClusterAddressing, ReplicaRef
from airflow_provider_training.frameworks.base import FrameworkPlugin, InjectionError, StatusUpdate
from airflow_provider_training.frameworks.events import Event
from airflow_provider_training.frameworks.expansion import expand, expand_command, resolve_env
from airflow_provider_training.frameworks.pods import PodState
from airflow_provider_training.frameworks.registry import PLUGINS, plugin, plugin_for_operator

__all__ = [
    "PLUGINS",
    "Addressing",
    "ClusterAddressing",
    "Event",
    "FrameworkPlugin",
    "InjectionError",
    "PodState",
    "ReplicaRef",
    "StatusUpdate",
    "expand",
    "expand_command",
    "plugin",
    "plugin_for_operator",
    "resolve_env",
]
