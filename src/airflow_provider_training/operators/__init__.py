"""Operators of the provider.

Training jobs: ``TrainingJobOperator`` (any kind) and ``PyTorchJobOperator``, ``TFJobOperator``,
``MPIJobOperator``, ``XGBoostJobOperator``, ``PaddleJobOperator``, ``MXJobOperator``,
``JAXJobOperator``; Kubeflow Trainer v2: ``TrainJobOperator``. ModelKits: ``ModelKitPackOperator``, ``ModelKitPushOperator``,
``ModelKitPackAndPushOperator`` (loaded on first use).
"""

from __future__ import annotations

import importlib
from typing import Any

from airflow_provider_training.operators.training import (
    JAXJobOperator,
    MPIJobOperator,
    MXJobOperator,
    PaddleJobOperator,
    PyTorchJobOperator,
    TFJobOperator,
    TrainingJobOperator,
    XGBoostJobOperator,
)

_LAZY = {
    "TrainJobOperator": "airflow_provider_training.operators.trainjob",
    "TrainingJobAPIOperator": "airflow_provider_training.operators.trainjob",
    "ModelKitPackOperator": "airflow_provider_training.operators.modelkit",
    "ModelKitPushOperator": "airflow_provider_training.operators.modelkit",
    "ModelKitPackAndPushOperator": "airflow_provider_training.operators.modelkit",
}

__all__ = [
    "JAXJobOperator",
    "MPIJobOperator",
    "MXJobOperator",
    "ModelKitPackAndPushOperator",
    "ModelKitPackOperator",
    "ModelKitPushOperator",
    "PaddleJobOperator",
    "PyTorchJobOperator",
    "TFJobOperator",
    "TrainJobOperator",
    "TrainingJobAPIOperator",
    "TrainingJobOperator",
    "XGBoostJobOperator",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
