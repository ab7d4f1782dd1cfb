"""Imports of the heavy client modules off the triggerer's event loop.

Airflow imports a trigger's module on the triggerer's event loop, and every ``import`` inside an
``async`` method also runs on it. The provider's trigger modules therefore import only
``airflow.triggers.base`` at module level; :func:`load` imports the clients (``kubernetes_asyncio``,
cncf.kubernetes' hooks, the provider's client) in a worker thread, once per process, so other
triggers keep running meanwhile.

Many triggers start within the same seconds (a mapped task's, after a triggerer restart), each
calling :func:`load`. Their imports run one at a time, and a load returns only once its modules
are whole: a module is in ``sys.modules`` from the start of its import, and two threads inside
``kubernetes`` at once (its modules import each other) failed with "cannot import name 'Watch'
from partially initialized module" (seen with 10 deferred tasks in one triggerer).
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Iterable

CLIENTS = ("airflow_provider_training.client", "airflow_provider_training.hooks.training")
_importing = threading.Lock()  # one import at a time, in whichever thread
_loaded: set[str] = set()  # imported to the end (``sys.modules`` also holds half-imported ones)


async def load(*modules: str) -> None:
    """Import ``modules`` (default: :data:`CLIENTS`) in a thread; instant once imported."""
    wanted = modules or CLIENTS
    if not _loaded.issuperset(wanted):
        await asyncio.to_thread(_import, wanted)


def _import(modules: Iterable[str]) -> None:
    with _importing:
        for module in modules:
            if module not in _loaded:
                importlib.import_module(module)
                _loaded.add(module)
