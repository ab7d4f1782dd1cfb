"""Extra link from a ModelKit task to the cockpit's "ModelKit" tab (layers, digest, Kitfile, metrics);
``registry_url`` gives the registry's own page (TCR's console), which that tab links to."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink

from airflow_provider_training import xcom
from airflow_provider_training.kitops.reference import TCR_PERSONAL_HOST, ReferenceError, is_tcr_host, parse
from airflow_provider_training.links.cockpit import MODELKIT_ROUTE, pushed, view_url

TCR_CONSOLE = "https://console.cloud.tencent.com/tcr"


def registry_url(reference: str) -> str:
    """Web page for a reference: TCR's console for TCR hosts, else the registry's manifest URL."""
    try:
        ref = parse(reference, check_tcr=False)
    except ReferenceError:
        return ""
    host = ref.registry.split(":")[0].lower()
    if host == TCR_PERSONAL_HOST:
        return f"{TCR_CONSOLE}/repository/details/ccr/{ref.namespace}/{ref.name}"
    if is_tcr_host(ref.registry):
        instance = host.split(".")[0]
        return f"{TCR_CONSOLE}/repository?instance={instance}&namespace={ref.namespace}&name={ref.name}"
    scheme = "http" if host in ("localhost", "127.0.0.1") else "https"
    return f"{scheme}://{ref.registry}/v2/{ref.repository}/manifests/{ref.target}"


class ModelKitRegistryLink(BaseOperatorLink):
    name = "ModelKit"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        if not pushed(operator, "_pushed_reference"):
            return ""  # the task failed before it pushed a ModelKit
        reference = XCom.get_value(ti_key=ti_key, key=xcom.REFERENCE)
        return view_url(ti_key, MODELKIT_ROUTE) if reference else ""
