"""Run by the client-37 venv (``kubernetes`` 37, pydantic models): read every kind and list the
embedded API server returns through the typed client and report what failed to deserialise.

    python client37_probe.py KUBECONFIG NAMESPACE  ->  JSON {"version", "read": {what: count}, "errors": [...]}

Kept free of this project's imports: it runs in a venv that only has the official client.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import kubernetes
from kubernetes import client, config, watch

TRAINING_PLURALS = ("pytorchjobs", "tfjobs", "mpijobs", "xgboostjobs", "paddlejobs", "mxjobs", "jaxjobs")


def main(kubeconfig: str, namespace: str) -> dict[str, Any]:
    api = config.new_client_from_config(config_file=kubeconfig)
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    ext, custom = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
    read: dict[str, int] = {}
    errors: list[str] = []

    def attempt(what: str, call: Callable[[], Any]) -> Any:
        try:
            result = call()
        except Exception as exc:  # every failure is reported, the probe goes on
            errors.append(f"{what}: {type(exc).__name__}: {exc}"[:2000])
            return None
        items = getattr(result, "items", None)
        read[what] = len(items) if isinstance(items, list) else 1
        return result

    def each(what: str, listing: Any, reader: Callable[[str], Any]) -> None:
        for item in getattr(listing, "items", None) or []:
            attempt(f"{what} {item.metadata.name}", lambda n=item.metadata.name: reader(n))

    attempt("namespaces", core.list_namespace)
    attempt(f"namespace {namespace}", lambda: core.read_namespace(namespace))
    listings: list[tuple[str, Callable[..., Any], Callable[[str], Any]]] = [
        ("pods", core.list_namespaced_pod, lambda n: core.read_namespaced_pod(n, namespace)),
        ("services", core.list_namespaced_service, lambda n: core.read_namespaced_service(n, namespace)),
        ("configmaps", core.list_namespaced_config_map, lambda n: core.read_namespaced_config_map(n, namespace)),
        ("secrets", core.list_namespaced_secret, lambda n: core.read_namespaced_secret(n, namespace)),
        (
            "persistentvolumeclaims",
            core.list_namespaced_persistent_volume_claim,
            lambda n: core.read_namespaced_persistent_volume_claim(n, namespace),
        ),
        ("events", core.list_namespaced_event, lambda n: core.read_namespaced_event(n, namespace)),
        ("jobs", batch.list_namespaced_job, lambda n: batch.read_namespaced_job(n, namespace)),
    ]
    for what, lister, reader in listings:
        listing = attempt(what, lambda lister=lister: lister(namespace))
        each(what[:-1], listing, reader)

        # a watch from the start: ADDED for every object, each one deserialised into its type
        def stream(lister: Callable[..., Any] = lister) -> Any:
            events = list(watch.Watch().stream(lister, namespace, timeout_seconds=1))
            return type("Events", (), {"items": events})()

        attempt(f"watch {what}", stream)
    attempt("pods (all namespaces)", core.list_pod_for_all_namespaces)
    attempt("events (all namespaces)", core.list_event_for_all_namespaces)
    crds = attempt("customresourcedefinitions", ext.list_custom_resource_definition)
    each("customresourcedefinition", crds, ext.read_custom_resource_definition)
    for plural in TRAINING_PLURALS:
        attempt(plural, lambda p=plural: custom.list_namespaced_custom_object("kubeflow.org", "v1", namespace, p))
    attempt(
        "inferenceservices",
        lambda: custom.list_namespaced_custom_object("serving.kserve.io", "v1beta1", namespace, "inferenceservices"),
    )
    return {"version": kubernetes.__version__, "read": read, "errors": errors}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
