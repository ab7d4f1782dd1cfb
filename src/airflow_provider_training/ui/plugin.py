"""The Airflow plugin that puts the cockpit into Airflow's UI.

Registered twice on purpose, and loaded once: Airflow 3.3 loads the plugins a provider lists in
``get_provider_info()["plugins"]`` only when ``[core] lazy_discover_providers`` is False, while
plugins of the ``airflow.plugins`` entry point load always. The entry point names
:data:`entry_point_plugin`, which is the plugin class only when provider discovery is lazy (the
default) and ``None`` otherwise — Airflow skips a ``None`` entry point silently, so the plugin is
never registered twice (which Airflow would report as a plugin import error).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_training.ui.app import app

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


class TrainingCockpitPlugin(AirflowPlugin):
    name = "airflow-provider-training"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "Training cockpit"}]
    react_apps = react_apps()


def _providers_discovered_lazily() -> bool:
    from airflow import settings

    return bool(getattr(settings, "LAZY_LOAD_PROVIDERS", True))


entry_point_plugin: type[AirflowPlugin] | None = TrainingCockpitPlugin if _providers_discovered_lazily() else None
