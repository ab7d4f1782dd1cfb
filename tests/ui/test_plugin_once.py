"""The cockpit plugin is registered once per process: Airflow reports a plugin loaded twice as a
"Plugin Import Error" on every user's home page and warns in every daemon and CLI command."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json
from importlib import metadata
from airflow import plugins_manager
plugins, errors = plugins_manager._get_plugins()
print(json.dumps({
    "errors": errors,
    "ours": [p.name for p in plugins].count("airflow-provider-training"),
    "distributions": [str(d._path) for d in metadata.distributions() if d.metadata["Name"] == "airflow-provider-training"],
}))
"""


def test_the_plugin_is_loaded_once_with_no_import_error():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["errors"] == {}, result
    assert result["ours"] == 1, result
    assert len(result["distributions"]) == 1, result  # a second one (an in-tree egg-info) loads it twice
    assert "already registered" not in out.stderr
