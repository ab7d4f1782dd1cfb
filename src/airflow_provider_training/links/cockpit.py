"""Where the training cockpit's views live in Airflow's UI (the routes the UI plugin registers)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

JOB_ROUTE = "training-job"
MODELKIT_ROUTE = "modelkit"
HISTORY_ROUTE = "training-history"


def base_url() -> str:
    """``[api] base_url`` when set (Airflow behind a proxy or a path prefix), else a root-relative link."""
    from airflow.sdk import conf

    return (conf.get("api", "base_url", fallback="") or "").rstrip("/")


# What a browser leaves as it is in a URL's path (RFC 3986 sub-delims, ":" and "@"). Airflow's UI
# marks a tab active when the page's path equals the tab's path as the browser writes it (React
# Router's NavLink: the route's decoded params, re-encoded by the URL parser): ":" and "+" of a
# run id stay unescaped there, so a link that escaped them opened the tab with no tab marked.
PATH_SAFE = "!$&'()*+,;=:@"


def _segment(value: str) -> str:
    return quote(value, safe=PATH_SAFE)


def view_url(ti_key: Any, route: str, base: str | None = None) -> str:
    """The task-instance tab ``route`` of the task instance ``ti_key`` (mapped ones included)."""
    path = f"/dags/{_segment(ti_key.dag_id)}/runs/{_segment(ti_key.run_id)}/tasks/{_segment(ti_key.task_id)}"
    map_index = getattr(ti_key, "map_index", -1)
    if map_index is not None and map_index >= 0:
        path += f"/mapped/{map_index}"
    return f"{base_url() if base is None else base}{path}/plugin/{route}"


def pushed(operator: Any, attribute: str) -> bool:
    """Whether the operator that just ran pushed what the link reads. ``get_link`` runs on the worker
    right after the task (also after a failure), with the operator that ran: asking XCom for a key
    that was never pushed makes Airflow log an error. An operator without the attribute (not the one
    that ran) is asked through XCom as before."""
    return getattr(operator, attribute, True) is not None
