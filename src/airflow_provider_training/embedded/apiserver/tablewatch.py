"""Watch events as table rows: ``kubectl get -w`` asks for ``as=Table`` and prints the columns of
each event's object. As kube-apiserver does, every event's object is a ``meta.k8s.io/v1 Table``
holding that one row; the column definitions come with the first event only."""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request

from airflow_provider_training.embedded.apiserver.http import dumps, wants_table
from airflow_provider_training.embedded.apiserver.tables import to_table
from airflow_provider_training.embedded.resources import ResourceType
from airflow_provider_training.specs.unstructured import Unstructured

ROW_EVENTS = ("ADDED", "MODIFIED", "DELETED")


def table_lines(request: Request, rt: ResourceType) -> Callable[[str, Unstructured], bytes] | None:
    """A renderer of watch lines as tables for this request, or None when it asked for objects."""
    if not wants_table(request):
        return None
    include = request.query_params.get("includeObject", "Metadata")
    first = True

    def line(event_type: str, obj: Unstructured) -> bytes:
        nonlocal first
        if event_type in ROW_EVENTS:
            meta = {"resourceVersion": obj.get("metadata", {}).get("resourceVersion", "")}
            table = to_table(rt, [obj], meta, include)
            if not first:
                table["columnDefinitions"] = []
            first = False
            obj = table
        return dumps({"type": event_type, "object": obj}) + b"\n"

    return line
