"""Extra link from a job task to its training job: a console page from ``[training] job_link_template``
(e.g. TKE's), or the job's URL on the API server (for the embedded control plane)."""

from __future__ import annotations

import string
from typing import Any

from airflow.sdk import BaseOperatorLink

from airflow_provider_training.client.resources import RESOURCES

FIELDS = ("kind", "plural", "name", "namespace", "uid")


def job_url(template: str, api_url: str, *, kind: str, name: str, namespace: str, uid: str = "") -> str:
    """Fill ``template`` (fields ``{kind} {plural} {name} {namespace} {uid}``), or give the API URL."""
    resource = RESOURCES.get(kind)
    plural = resource.plural if resource else f"{kind.lower()}s"
    if not template:
        if not api_url or resource is None:
            return ""
        return f"{api_url.rstrip('/')}{resource.path(namespace, name)}"
    values = {"kind": kind, "plural": plural, "name": name, "namespace": namespace, "uid": uid}
    unknown = [f for _, f, _, _ in string.Formatter().parse(template) if f and f not in FIELDS]
    if unknown:
        raise ValueError(
            f"[training] job_link_template uses unknown field(s) {', '.join(unknown)}; "
            f"available: {', '.join('{' + f + '}' for f in FIELDS)}"
        )
    return template.format(**values)


class TrainingJobLink(BaseOperatorLink):
    """Reads the job's identity from XCom (pushed before the task waits)."""

    name = "Training job"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from airflow.sdk import conf
        from airflow.sdk.execution_time.xcom import XCom

        name = XCom.get_value(ti_key=ti_key, key="job_name")
        if not name:
            return ""
        return job_url(
            conf.get("training", "job_link_template", fallback="") or "",
            XCom.get_value(ti_key=ti_key, key="job_api_url") or "",
            kind=XCom.get_value(ti_key=ti_key, key="job_kind") or "",
            name=name,
            namespace=XCom.get_value(ti_key=ti_key, key="job_namespace") or "default",
            uid=XCom.get_value(ti_key=ti_key, key="job_uid") or "",
        )
