"""``plugin(kind)``: the plugin for a kind name."""

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
