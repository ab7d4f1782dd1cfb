"""Airflow loads every plugin in each task's process (for plugin macros): loading the cockpit plugin
there must not import the cockpit's FastAPI app and the Kubernetes clients, which only the
api-server uses (they cost about a second per task before the app became lazy)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import airflow.sdk, airflow.plugins_manager  # what a task's process has loaded anyway
before = set(sys.modules)
import airflow_provider_training.ui.plugin as plugin
app = plugin.TrainingCockpitPlugin.fastapi_apps[0]["app"]
print(json.dumps({
    "new": sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("kubernetes", "kubernetes_asyncio")
                  or m == "airflow_provider_training.ui.app"),
    "app": type(app).__name__,
}))
"""


def test_loading_the_plugin_imports_neither_the_app_nor_the_clients():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"new": [], "app": "CockpitApp"}
