"""Debian's chromium driven by Playwright (never a downloaded browser), signed in to a deployment
by the JWT cookie Airflow's UI itself uses."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from typing import Any

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextlib.contextmanager
def browser(deployment: Any, user: str = "admin") -> Iterator[Any]:
    """A fresh browser context (own user-data-dir) signed in as ``user``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="cockpit-chromium-") as profile:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=ARGS, viewport={"width": 1400, "height": 1000}
        )
        try:
            context.add_cookies([{"name": "_token", "value": deployment.user_tokens[user], "url": deployment.base_url}])
            yield context
        finally:
            context.close()


def ti_url(deployment: Any, dag_id: str, run_id: str, task_id: str, route: str) -> str:
    """The tab as the operators' extra links write it (so Airflow marks it active)."""
    from types import SimpleNamespace

    from airflow_provider_training.links.cockpit import view_url

    key = SimpleNamespace(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=-1)
    return view_url(key, route, base=deployment.base_url)
