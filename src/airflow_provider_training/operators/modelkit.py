"""ModelKit operators: pack a model output directory, push it to an OCI registry (TCR), or both.

XCom: ``reference``, ``digest``, ``size`` (pushed as soon as known); the return value lists the layers.
Each push emits an Asset event on ``modelkit://<registry>/<namespace>/<repo>`` with tag and digest in
the event's extra (through the task's ``modelkit`` AssetAlias, since the reference is templated).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from airflow.sdk import Asset, AssetAlias, BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_provider_training.kitops import pack as packmod
from airflow_provider_training.kitops import transfer
from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.engine import KitEngine, KitEngineError
from airflow_provider_training.kitops.reference import DEFAULT_TAG, Reference, ReferenceError, parse
from airflow_provider_training.kitops.registry import RegistryClient, RegistryError
from airflow_provider_training.kitops.source import ClusterModeUnavailableError, resolve_source
from airflow_provider_training.kitops.store import LocalStore, StoreError
from airflow_provider_training.kitops.tarlayer import COMPRESSIONS
from airflow_provider_training.links.modelkit import ModelKitRegistryLink
from airflow_provider_training.specs.kitfile import KitfileError

ENGINES = ("native", "kit")
ASSET_SCHEME = "modelkit://"


def modelkit_asset(ref: Reference) -> Asset:
    """One Asset per repository: ``modelkit://<registry>/<namespace>/<repo>``."""
    return Asset(uri=f"{ASSET_SCHEME}{ref.registry}/{ref.repository}", name=f"modelkit/{ref.registry}/{ref.repository}")


class _ModelKitBase(BaseOperator):
    template_fields: Sequence[str] = (
        "source",
        "kitfile",
        "reference",
        "registry_conn_id",
        "compression",
        "engine",
    )
    template_fields_renderers = {"kitfile": "yaml"}
    operator_extra_links = (ModelKitRegistryLink(),)
    ui_color = "#e8f4ea"

    def __init__(
        self,
        *,
        reference: str,
        source: str | None = None,
        kitfile: str | None = None,
        registry_conn_id: str | None = None,
        compression: str = "none",
        engine: str = "native",
        kit_binary: str | None = None,
        namespace: str = "default",
        kubernetes_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.alias = AssetAlias(f"modelkit:{kwargs.get('task_id', '')}")
        kwargs.setdefault("outlets", [])
        kwargs["outlets"] = [*kwargs["outlets"], self.alias]
        super().__init__(**kwargs)
        self.reference = reference
        self.source = source
        self.kitfile = kitfile
        self.registry_conn_id = registry_conn_id
        self.compression = compression
        self.engine = engine
        self.kit_binary = kit_binary
        self.namespace = namespace
        self.kubernetes_conn_id = kubernetes_conn_id

    # -- shared steps -------------------------------------------------------------------------------
    def _check(self) -> Reference:
        if self.engine not in ENGINES:
            raise AirflowException(f"engine {self.engine!r} is not one of {', '.join(ENGINES)}")
        if self.compression not in COMPRESSIONS:
            raise AirflowException(f"compression {self.compression!r} is not one of {', '.join(COMPRESSIONS)}")
        try:
            return parse(self.reference, default_tag=DEFAULT_TAG)
        except ReferenceError as exc:
            raise AirflowException(f"reference: {exc}") from None

    def _kit(self) -> KitEngine:
        binary = self.kit_binary
        if binary is None:
            from airflow.sdk import conf

            binary = conf.get("training", "kit_binary", fallback=None) or None
        return KitEngine(binary=binary)

    def _client(self, ref: Reference) -> RegistryClient:
        if self.registry_conn_id:
            from airflow_provider_training.hooks.registry import ModelKitRegistryHook

            return ModelKitRegistryHook(self.registry_conn_id).get_conn(ref.registry)
        return make_client(ref.registry)

    def _network(self) -> dict[str, Any]:
        if not self.registry_conn_id:
            return {"plain_http": False, "tls_verify": True}
        from airflow_provider_training.hooks.registry import ModelKitRegistryHook

        opts = ModelKitRegistryHook(self.registry_conn_id).options
        return {"plain_http": opts["plain_http"], "tls_verify": opts["tls_verify"]}

    def _pack(self, ref: Reference, context: Any) -> dict[str, Any]:
        if not self.source:
            raise AirflowException("source is required to pack (a directory or pvc://<claim>/<path>)")
        try:
            directory = resolve_source(self.source, self.namespace, cluster=bool(self.kubernetes_conn_id))
        except (ClusterModeUnavailableError, ValueError) as exc:
            raise AirflowException(str(exc)) from None
        self.log.info("Packing %s as %s (compression %s, engine %s)", directory, ref, self.compression, self.engine)
        try:
            if self.engine == "kit":
                self._kit().pack(directory, str(ref), kitfile=self.kitfile, compression=self.compression)
                inspected = transfer.inspect_local(LocalStore(), ref)
                manifest = inspected["manifest"]
                result = {
                    "digest": inspected["digest"],
                    "layers": transfer._layer_summary(manifest),
                    "size": sum(x["size"] for x in manifest.get("layers") or []) + manifest["config"]["size"],
                }
            else:
                res = packmod.pack(directory, kitfile=self.kitfile, reference=ref, compression=self.compression)
                result = {"digest": res.digest, "size": res.size, "layers": [x.to_json() for x in res.layers]}
        except (KitfileError, StoreError, KitEngineError, FileNotFoundError, ValueError) as exc:
            raise AirflowException(str(exc)) from None
        self._xcom(context, ref, result)
        return result

    def _push(self, ref: Reference, context: Any) -> dict[str, Any]:
        self.log.info("Pushing %s (engine %s)", ref, self.engine)
        try:
            if self.engine == "kit":
                kit = self._kit()
                hook_cred = None
                if self.registry_conn_id:
                    from airflow_provider_training.hooks.registry import ModelKitRegistryHook

                    hook_cred = ModelKitRegistryHook(self.registry_conn_id).credential
                net = self._network()
                if hook_cred and hook_cred.username:
                    kit.login(ref.registry, hook_cred.username, hook_cred.password, **net)
                digest = kit.push(str(ref), **net)
                inspected = transfer.inspect_local(LocalStore(), ref)
                manifest = inspected["manifest"]
                result = {
                    "digest": digest,
                    "layers": transfer._layer_summary(manifest),
                    "uploaded": None,
                    "size": sum(x["size"] for x in manifest.get("layers") or []) + manifest["config"]["size"],
                }
            else:
                with self._client(ref) as client:
                    res = transfer.push(LocalStore(), ref, client)
                result = {
                    "digest": res.digest,
                    "size": res.size,
                    "layers": res.layers,
                    "uploaded": res.transferred,
                }
        except (RegistryError, StoreError, KitEngineError) as exc:
            raise AirflowException(str(exc)) from None
        self._xcom(context, ref, result)
        extra = {
            "reference": str(ref),
            "registry": ref.registry,
            "repository": ref.repository,
            "tag": ref.tag,
            "digest": result["digest"],
            "size": result["size"],
        }
        context["outlet_events"][self.alias].add(modelkit_asset(ref), extra=extra)
        self.log.info("Pushed %s@%s", ref, result["digest"])
        return result

    def _xcom(self, context: Any, ref: Reference, result: dict[str, Any]) -> None:
        ti = context["ti"]
        ti.xcom_push(key="reference", value=str(ref))
        ti.xcom_push(key="digest", value=result["digest"])
        ti.xcom_push(key="size", value=result["size"])

    @staticmethod
    def _return(ref: Reference, result: dict[str, Any]) -> dict[str, Any]:
        out = {
            "reference": str(ref),
            "digest": result["digest"],
            "size": result["size"],
            "layers": result["layers"],
        }
        json.dumps(out)  # XCom must be JSON-serializable
        return out


class ModelKitPackOperator(_ModelKitBase):
    """Pack ``source`` (directory or ``pvc://claim/path``) into the local ModelKit store as ``reference``."""

    def execute(self, context: Any) -> dict[str, Any]:
        ref = self._check()
        return self._return(ref, self._pack(ref, context))


class ModelKitPushOperator(_ModelKitBase):
    """Push ``reference`` from the local ModelKit store to its registry."""

    def execute(self, context: Any) -> dict[str, Any]:
        ref = self._check()
        return self._return(ref, self._push(ref, context))


class ModelKitPackAndPushOperator(_ModelKitBase):
    """Pack ``source`` and push it to ``reference`` in one task."""

    def execute(self, context: Any) -> dict[str, Any]:
        ref = self._check()
        self._pack(ref, context)
        return self._return(ref, self._push(ref, context))
