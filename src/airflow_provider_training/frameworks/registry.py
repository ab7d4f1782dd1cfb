"""``plugin(kind)``: the plugin for a kind name; ``plugin_for_operator``: for a pod's operator-name label."""

from __future__ import annotations

from airflow_provider_training.frameworks.base import FrameworkPlugin
from airflow_provider_training.frameworks.jax import JAXPlugin
from airflow_provider_training.frameworks.mpi import MPIPlugin
from airflow_provider_training.frameworks.mxnet import MXPlugin
from airflow_provider_training.frameworks.paddle import PaddlePlugin
from airflow_provider_training.frameworks.pytorch import PyTorchPlugin
from airflow_provider_training.frameworks.tensorflow import TFPlugin
from airflow_provider_training.frameworks.xgboost import XGBoostPlugin

PLUGINS: dict[str, FrameworkPlugin] = {
    p.info.kind: p
    for p in (PyTorchPlugin(), TFPlugin(), MPIPlugin(), XGBoostPlugin(), PaddlePlugin(), MXPlugin(), JAXPlugin())
}


def plugin(kind: str) -> FrameworkPlugin:
    """The plugin for ``kind`` (``PyTorchJob``…); a KeyError names the supported kinds."""
    try:
        return PLUGINS[kind]
    except KeyError:
        raise KeyError(f"unknown kind {kind!r}: supported kinds are {', '.join(PLUGINS)}") from None


def plugin_for_operator(operator_name: str | None) -> FrameworkPlugin | None:
    """The plugin whose pods carry ``training.kubeflow.org/operator-name: operator_name``, if any."""
    return next((p for p in PLUGINS.values() if p.info.operator_name == operator_name), None)
