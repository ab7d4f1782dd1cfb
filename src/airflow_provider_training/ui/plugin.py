"""The Airflow plugin that puts the cockpit into Airflow's UI.

Registered twice on purpose, and loaded once: Airflow 3.3 loads the plugins a provider lists in
``get_provider_info()["plugins"]`` only when ``[core] lazy_discover_providers`` is False, while
plugins of the ``airflow.plugins`` entry point load always. The entry point names
:data:`entry_point_plugin`, which is the plugin class only when provider discovery is lazy (the
default) and ``None`` otherwise — Airflow skips a ``None`` entry point silently, so the plugin is
never registered twice (which Airflow would report as a plugin import error).

Airflow also loads every plugin in each task's process (for plugin macros), where the cockpit's
routes are never served. So this module stays light: the FastAPI app (FastAPI, the Kubernetes
clients, Airflow's API security) is imported at the first request the api-server routes to it.
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from typing import Any

import anyio
from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/training"
BUNDLE = Path(__file__).parent / "static" / "cockpit.js"
# Names the bundle registers its components under (``globalThis[name]``); the UI looks them up by name.
JOB_VIEW, MODELKIT_VIEW, HISTORY_VIEW = "Training job", "ModelKit", "Training history"
JOB_ROUTE, MODELKIT_ROUTE, HISTORY_ROUTE = "training-job", "modelkit", "training-history"


def _bundle_url() -> str:
    """Relative to the UI's ``<base href>``; the content hash busts browser caches on upgrade."""
    version = hashlib.sha256(BUNDLE.read_bytes()).hexdigest()[:12] if BUNDLE.exists() else "missing"
    return f"{URL_PREFIX.lstrip('/')}/static/cockpit.js?v={version}"


def react_apps() -> list[dict[str, Any]]:
    bundle = _bundle_url()
    return [
        {"name": JOB_VIEW, "bundle_url": bundle, "destination": "task_instance", "url_route": JOB_ROUTE},
        {"name": MODELKIT_VIEW, "bundle_url": bundle, "destination": "task_instance", "url_route": MODELKIT_ROUTE},
        {"name": HISTORY_VIEW, "bundle_url": bundle, "destination": "dag", "url_route": HISTORY_ROUTE},
    ]


class CockpitApp:
    """The ASGI app mounted at ``/training``: imports ``ui.app`` once, off the event loop, at the
    first request, then hands every request to it."""

    def __init__(self) -> None:
        self._app: Any = None
        self._lock = anyio.Lock()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            async with self._lock:
                if self._app is None:
                    module = await anyio.to_thread.run_sync(importlib.import_module, "airflow_provider_training.ui.app")
                    self._app = module.app
        await self._app(scope, receive, send)


class TrainingCockpitPlugin(AirflowPlugin):
    name = "airflow-provider-training"
    fastapi_apps = [{"app": CockpitApp(), "url_prefix": URL_PREFIX, "name": "Training cockpit"}]
    react_apps = react_apps()


def _providers_discovered_lazily() -> bool:
    from airflow import settings

    return bool(getattr(settings, "LAZY_LOAD_PROVIDERS", True))


entry_point_plugin: type[AirflowPlugin] | None = TrainingCockpitPlugin if _providers_discovered_lazily() else None
