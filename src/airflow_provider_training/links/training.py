"""Extra link from a job task to its training job: the cockpit's "Training job" tab in Airflow's UI,
or a console page from ``[training] job_link_template`` (e.g. TKE's or a Kubeflow dashboard)."""

from __future__ import annotations

import string
from typing import Any

from airflow.sdk import BaseOperatorLink

from airflow_provider_training import xcom
from airflow_provider_training.links.cockpit import JOB_ROUTE, pushed, view_url

FIELDS = ("kind", "plural", "name", "namespace", "uid")


def job_url(template: str, api_url: str, *, kind: str, name: str, namespace: str, uid: str = "") -> str:
    """Fill ``template`` (fields ``{kind} {plural} {name} {namespace} {uid}``), or give the API URL."""
    # Imported here: the triggerer imports the link class (deserializing the task) on its event loop,
    # and the client package pulls in the Kubernetes clients (~1 s).
    from airflow_provider_training.client.resources import RESOURCES

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

        if not pushed(operator, "_submitted"):
            return ""  # the task failed before it submitted a job
        name = XCom.get_value(ti_key=ti_key, key=xcom.JOB_NAME)
        if not name:
            return ""
        template = conf.get("training", "job_link_template", fallback="") or ""
        if not template:
            return view_url(ti_key, JOB_ROUTE)
        return job_url(
            template,
            "",
            kind=XCom.get_value(ti_key=ti_key, key=xcom.JOB_KIND) or "",
            name=name,
            namespace=XCom.get_value(ti_key=ti_key, key=xcom.JOB_NAMESPACE) or "default",
            uid=XCom.get_value(ti_key=ti_key, key=xcom.JOB_UID) or "",
        )
