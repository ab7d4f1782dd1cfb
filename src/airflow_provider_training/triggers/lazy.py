"""Imports of the heavy client modules off the triggerer's event loop.

Airflow imports a trigger's module on the triggerer's event loop, and every ``import`` inside an
``async`` method also runs on it. The provider's trigger modules therefore import only
``airflow.triggers.base`` at module level; :func:`load` imports the clients (``kubernetes_asyncio``,
cncf.kubernetes' hooks, the provider's client) in a worker thread, once per process, so other
triggers keep running meanwhile.
"""

from __future__ import annotations

import asyncio
import importlib
import sys

CLIENTS = ("airflow_provider_training.client", "airflow_provider_training.hooks.training")


async def load(*modules: str) -> None:
    """Import ``modules`` (default: :data:`CLIENTS`) in a thread; instant once imported."""
    for module in modules or CLIENTS:
        if module not in sys.modules:
            await asyncio.to_thread(importlib.import_module, module)
