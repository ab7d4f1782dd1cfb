"""Every namespace has a ``default`` service account (kube-controller-manager's ``serviceaccount``
controller): made again if it is deleted. (The API server makes it with the namespace, so a pod
created right after its namespace finds it; ``embedded/serviceaccount.ensure_default``.)"""

from __future__ import annotations

from collections.abc import Iterable

from airflow_provider_training.embedded import serviceaccount
from airflow_provider_training.embedded.runtime import ControllerContext, For, Watches
from airflow_provider_training.embedded.runtime.controller import Key, run
from airflow_provider_training.embedded.store import WatchEvent
from airflow_provider_training.specs.refs import ObjectRef
from airflow_provider_training.specs.resources import NAMESPACES, SERVICE_ACCOUNTS


def _deleted_default(event: WatchEvent) -> Iterable[Key]:
    if event.type == "DELETED" and event.name == serviceaccount.DEFAULT_ACCOUNT:
        return [ObjectRef("Namespace", "", event.namespace)]
    return []


class ServiceAccountsController:
    name = "serviceaccounts"
    sources = (For(NAMESPACES.key), Watches(SERVICE_ACCOUNTS.key, _deleted_default))

    async def run(self, ctx: ControllerContext) -> None:
        self.store = ctx.store
        await run(self, ctx)

    def reconcile(self, key: Key) -> float | None:
        namespace = self.store.get(NAMESPACES.key, "", key.name)
        if namespace is not None and (namespace.get("status") or {}).get("phase") != "Terminating":
            serviceaccount.ensure_default(self.store, key.name)
        return None
