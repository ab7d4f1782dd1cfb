"""ModelKit operators: pack a model output directory, push it to an OCI registry (TCR), or both.

XCom: ``reference``, ``digest``, ``size`` (pushed as soon as known); the return value lists the layers.
Each push emits an Asset event on ``modelkit://<registry>/<namespace>/<repo>`` with tag and digest in
the event's extra (through the task's ``modelkit`` AssetAlias, since the reference is templated).

``mode``: ``local`` packs on the worker; ``job`` (``ModelKitPackAndPushOperator`` with a ``pvc://``
source) packs and pushes in a ``batch/v1`` Job on the cluster that mounts the claim
(``operators/modelkit_job.py``); ``auto`` (default) is ``job`` exactly when the source is ``pvc://``
and a ``kubernetes`` connection is in use (``kubernetes_conn_id`` or ``[training] kubernetes_conn_id``),
the task runs in a pod of the embedded control plane (which cannot read the claim's directory), or
the embedded control plane runs images (``[training] embedded_runtime = oci``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import Asset, AssetAlias, BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_provider_training import xcom
from airflow_provider_training.hooks.training import DEFAULT, TrainingHook, resolve_conn_id, targets_embedded
from airflow_provider_training.kitops import keys, packpush, signing, transfer
from airflow_provider_training.kitops import pack as packmod
from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.engine import KitEngine, KitEngineError
from airflow_provider_training.kitops.localstore import LocalStore, StoreError
from airflow_provider_training.kitops.mediatypes import LAYER_FORMATS
from airflow_provider_training.kitops.packagejob import KIT_IMAGE, PackageJob
from airflow_provider_training.kitops.provenance import statement as provenance_statement
from airflow_provider_training.kitops.reference import DEFAULT_TAG, Reference, ReferenceError, parse
from airflow_provider_training.kitops.registry import RegistryClient, RegistryError
from airflow_provider_training.kitops.source import PVC_SCHEME, ClusterModeUnavailableError, resolve_source, split_pvc
from airflow_provider_training.kitops.tarlayer import COMPRESSIONS
from airflow_provider_training.links.modelkit import ModelKitRegistryLink
from airflow_provider_training.operators.modelkit_job import FINISH_ACTIONS, PackagingJobRunner, job_name
from airflow_provider_training.operators.modelkit_provenance import build_facts
from airflow_provider_training.specs.kitfile import KitfileError

ENGINES = ("native", "kit")
MODES = ("auto", "local", "job")
ASSET_SCHEME = "modelkit://"


def _label(value: str | None) -> str:
    """A Kubernetes label value (63 characters of [A-Za-z0-9._-], alphanumeric at both ends)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", value or "")[:63].strip("-._")


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
        "mode",
        "namespace",
        "kubernetes_conn_id",
        "image",
        "signing_conn_id",
        "signing_key",
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
        kubernetes_conn_id: str | None = DEFAULT,
        mode: str = "auto",
        image: str | None = None,
        registry_secret_name: str = "kitops-credentials",
        on_finish_action: str = "delete_succeeded",
        timeout: float = 3600.0,
        poll_interval: float = 10.0,
        backoff_limit: int = 0,
        log_tail_lines: int = 30,
        modelpack: bool = False,
        layer_format: str = "tar",
        sign: bool = False,
        signing_conn_id: str | None = None,
        signing_key: str | None = None,
        provenance: bool = True,
        training_task_ids: list[str] | None = None,
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
        # None meant "[training] kubernetes_conn_id" here: it stays so, read at run time like DEFAULT.
        self.kubernetes_conn_id = DEFAULT if kubernetes_conn_id is None else kubernetes_conn_id
        if on_finish_action not in FINISH_ACTIONS:
            raise ValueError(f"on_finish_action must be one of {', '.join(FINISH_ACTIONS)} (got {on_finish_action!r})")
        self.mode = mode
        self.image = image
        self.registry_secret_name = registry_secret_name
        self.on_finish_action = on_finish_action
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.backoff_limit = backoff_limit
        self.log_tail_lines = log_tail_lines
        self.modelpack = modelpack
        if layer_format not in LAYER_FORMATS:
            raise ValueError(f"layer_format must be one of {', '.join(LAYER_FORMATS)} (got {layer_format!r})")
        self.layer_format = layer_format
        self.sign = sign  # also implied by signing_conn_id / signing_key once rendered (an empty one: off)
        self.signing_conn_id = signing_conn_id
        self.signing_key = signing_key
        self.provenance = provenance
        self.training_task_ids = training_task_ids
        self._pushed_reference: str | None = None  # for the extra link: set once the reference is in XCom
        self._key: Any = None  # the signing key, loaded by _preflight before anything is pushed
        self._runner: PackagingJobRunner | None = None  # the packaging Job of this try (for on_kill)
        self._lineage: tuple[Reference, dict[str, Any]] | None = None  # for the OpenLineage facets

    # -- plumbing ---------------------------------------------------------------------------------
    def _conn_id(self) -> str | None:
        """The ``kubernetes`` connection this run uses (None: none, i.e. the embedded control plane)."""
        return resolve_conn_id(self.kubernetes_conn_id)

    def hook(self) -> TrainingHook:
        return TrainingHook(kubernetes_conn_id=self._conn_id())

    # -- shared steps -------------------------------------------------------------------------------
    def _check(self) -> Reference:
        if self.mode not in MODES:
            raise AirflowException(f"mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.engine not in ENGINES:
            raise AirflowException(f"engine {self.engine!r} is not one of {', '.join(ENGINES)}")
        if self.compression not in COMPRESSIONS:
            raise AirflowException(f"compression {self.compression!r} is not one of {', '.join(COMPRESSIONS)}")
        try:
            return parse(self.reference, default_tag=DEFAULT_TAG)
        except ReferenceError as exc:
            raise AirflowException(f"reference: {exc}") from None

    def _preflight(self) -> None:
        """Check what the push needs that can be checked before anything is pushed: the registry
        connection and, when signing, the signing key. Found only after the push, a bad signing
        connection failed the run with an unsigned ModelKit already pushed and tagged."""
        from airflow.sdk.exceptions import AirflowNotFoundException

        if self.registry_conn_id:
            from airflow_provider_training.hooks.registry import ModelKitRegistryHook

            try:
                _ = ModelKitRegistryHook(self.registry_conn_id).connection  # raises when the id is unknown
            except AirflowNotFoundException:
                raise AirflowException(
                    f"registry_conn_id {self.registry_conn_id!r}: no Airflow connection has this id; create a "
                    "modelkit_registry connection with it (Admin > Connections, or AIRFLOW_CONN_<ID>) or fix the id. "
                    "Nothing was pushed."
                ) from None
        if not (self.sign or self.signing_conn_id or self.signing_key):
            return
        try:
            self._key = self._signing_key()
        except AirflowNotFoundException:
            raise AirflowException(
                f"signing_conn_id {self.signing_conn_id!r}: no Airflow connection has this id; create a "
                "modelkit_signing connection with it (docs/kitops.md) or leave signing_conn_id empty for an "
                "unsigned ModelKit. Nothing was pushed."
            ) from None
        except keys.KeyProblem as exc:
            raise AirflowException(f"signing key: {exc}. Nothing was pushed.") from None

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
            directory = resolve_source(self.source, self.namespace, cluster=not targets_embedded(self._conn_id()))
        except (ClusterModeUnavailableError, ValueError) as exc:
            raise AirflowException(str(exc)) from None
        self.log.info("Packing %s as %s (compression %s, engine %s)", directory, ref, self.compression, self.engine)
        try:
            if self.engine == "kit":
                self._kit().pack(
                    directory,
                    str(ref),
                    kitfile=self.kitfile,
                    compression=self.compression,
                    modelpack=self.modelpack,
                    layer_format=self.layer_format,
                )
                inspected = transfer.inspect_local(LocalStore(), ref)
                manifest = inspected["manifest"]
                result = {
                    "digest": inspected["digest"],
                    "layers": transfer._layer_summary(manifest),
                    "size": sum(x["size"] for x in manifest.get("layers") or []) + manifest["config"]["size"],
                }
            else:
                res = packmod.pack(
                    directory,
                    kitfile=self.kitfile,
                    reference=ref,
                    compression=self.compression,
                    modelpack=self.modelpack,
                    layer_format=self.layer_format,
                )
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
        self._sign_and_attest(ref, context, result)
        self._asset_event(context, ref, result)
        return result

    def _asset_event(self, context: Any, ref: Reference, result: dict[str, Any]) -> None:
        extra = {
            "reference": str(ref),
            "registry": ref.registry,
            "repository": ref.repository,
            "tag": ref.tag,
            "digest": result["digest"],
            "size": result["size"],
        }
        for key in ("signature", "provenance"):
            if result.get(key):
                extra[key] = result[key]
        context["outlet_events"][self.alias].add(modelkit_asset(ref), extra=extra)
        self.log.info("Pushed %s@%s", ref, result["digest"])

    # -- signing -------------------------------------------------------------------------------------
    def _signing_key(self) -> Any:
        if self.signing_conn_id:
            from airflow_provider_training.hooks.signing import ModelKitSigningHook

            return ModelKitSigningHook(self.signing_conn_id).private_key()
        if self.signing_key:
            data, source = keys.key_bytes(self.signing_key, "signing key")
            return keys.load_private_key(data, os.environ.get("COSIGN_PASSWORD"), source)
        raise keys.KeyProblem("sign=True needs signing_conn_id (a modelkit_signing connection) or signing_key")

    def _sign_and_attest(self, ref: Reference, context: Any, result: dict[str, Any]) -> None:
        """Sign the pushed digest (cosign layout) and attach the run's SLSA provenance, signed with
        the same key; XCom ``signature`` and ``provenance`` name where they are."""
        if not (self.sign or self.signing_conn_id or self.signing_key):
            return
        digest = result["digest"]
        repository = f"{ref.registry}/{ref.repository}"
        try:
            key = self._key if self._key is not None else self._signing_key()
            statement = None
            if self.provenance:
                facts = build_facts(self, context, str(self.source or ""), self.training_task_ids)
                statement = provenance_statement(repository, digest, facts, result["layers"], str(ref))
            with self._client(ref) as client:
                sig, att = signing.sign_and_attest(client, ref, digest, key, statement)
            result["signature"] = f"{repository}:{sig.tag}"
            if att is not None:
                result["provenance"] = f"{repository}:{att.tag}"
        except (keys.KeyProblem, RegistryError) as exc:
            # The ModelKit is in the registry by now: say which tag is left unsigned.
            raise AirflowException(
                f"signing {repository}@{digest} failed: {exc}. The ModelKit was pushed as {ref} but is not "
                "signed: delete that tag, or sign it again (kit sign / a re-run of this task)."
            ) from None
        ti = context["ti"]
        ti.xcom_push(key=xcom.SIGNATURE, value=result["signature"])
        if result.get("provenance"):
            ti.xcom_push(key=xcom.PROVENANCE, value=result["provenance"])
        self.log.info(
            "Signed %s@%s (%s)", repository, digest, ", ".join(k for k in ("signature", "provenance") if result.get(k))
        )

    # -- cluster mode ------------------------------------------------------------------------------
    def _runs_as_job(self) -> bool:
        """Whether this task packs in a Job on the cluster (see the module docstring)."""
        pvc = bool(self.source) and str(self.source).startswith(PVC_SCHEME)
        if self.mode == "job":
            if not pvc:
                raise AirflowException(
                    f"mode='job' packs a PersistentVolumeClaim on the cluster: source must be "
                    f"pvc://<claim>/<path> (got {self.source!r})"
                )
            return True
        if self.mode != "auto" or not pvc:
            return False
        from airflow.sdk import conf

        # on a cluster (or from a pod of the embedded plane); and on an embedded control plane whose
        # node runs images (kit from the packaging image, as on the cluster: the rehearsal of
        # docs/embedded.md "Real images")
        return not targets_embedded(self._conn_id()) or conf.get("training", "embedded_runtime", fallback="") == "oci"

    def _pack_and_push_in_job(self, ref: Reference, context: Any) -> dict[str, Any]:
        try:
            split = split_pvc(str(self.source))
        except ValueError as exc:
            raise AirflowException(str(exc)) from None
        assert split is not None
        claim, path = split
        secret_data, net = None, {"plain_http": False, "tls_verify": True}
        if self.registry_conn_id:
            from airflow_provider_training.hooks.registry import ModelKitRegistryHook

            hook = ModelKitRegistryHook(self.registry_conn_id)
            opts = hook.options
            if opts["ca_cert"]:
                raise AirflowException(
                    f"connection {self.registry_conn_id!r}: a custom CA (ca_cert) is not supported by the "
                    "packaging Job yet; use a registry with a publicly trusted certificate or mode='local'"
                )
            net = {"plain_http": opts["plain_http"], "tls_verify": opts["tls_verify"]}
            secret_data = hook.secret_data() if hook.credential is not None else None
        ti = context["ti"]
        job = PackageJob(
            name=job_name(self.task_id, str(ti.run_id), int(getattr(ti, "try_number", 1) or 1)),
            namespace=self.namespace,
            claim=claim,
            path=path,
            reference=str(ref),
            registry=ref.registry,
            image=self._image(),
            kitfile=self._job_kitfile(),
            compression=self.compression,
            modelpack=self.modelpack,
            layer_format=self.layer_format,
            secret=self.registry_secret_name if secret_data else None,
            backoff_limit=self.backoff_limit,
            active_deadline_seconds=int(self.timeout) if self.timeout else None,
            labels={
                "airflow.apache.org/dag-id": _label(self.dag_id),
                "airflow.apache.org/task-id": _label(self.task_id),
            },
            **net,
        )
        client = self.hook().get_client(poll_interval=self.poll_interval)
        self._runner = PackagingJobRunner(
            client,
            job,
            secret_data=secret_data,
            log=self.log,
            timeout=self.timeout,
            on_finish_action=self.on_finish_action,
            log_tail_lines=self.log_tail_lines,
        )
        output = self._runner.run()
        manifest = output.manifest or {}
        result = {
            "digest": output.digest,
            "size": output.size,
            "layers": transfer._layer_summary(manifest),
            "uploaded": None,
        }
        self._xcom(context, ref, result)
        self._sign_and_attest(ref, context, result)
        self._asset_event(context, ref, result)
        return result

    def _image(self) -> str:
        if self.image:
            return self.image
        from airflow.sdk import conf

        return conf.get("training", "kit_image", fallback="") or KIT_IMAGE

    def _job_kitfile(self) -> str | None:
        """YAML text goes to the Job as is; a path on this worker is sent as its text; any other
        path is taken as relative to the claim's root (or absolute inside the container)."""
        if self.kitfile is None or "\n" in self.kitfile:
            return self.kitfile
        local = Path(self.kitfile).expanduser()
        if local.is_file():
            return local.read_text()
        return self.kitfile

    def on_kill(self) -> None:
        if self._runner is not None:
            self._runner.cleanup()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage: the packed directory (or claim) in, the ModelKit (versioned by digest) out."""
        from airflow_provider_training.operators.lineage import modelkit_lineage

        return modelkit_lineage(self)

    def _xcom(self, context: Any, ref: Reference, result: dict[str, Any]) -> None:
        self._lineage = (ref, result)  # signing adds its references to the same dict
        ti = context["ti"]
        ti.xcom_push(key=xcom.REFERENCE, value=str(ref))
        ti.xcom_push(key=xcom.DIGEST, value=result["digest"])
        ti.xcom_push(key=xcom.SIZE, value=result["size"])
        self._pushed_reference = str(ref)

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
        if self._runs_as_job():
            raise AirflowException(
                f"{self.source} is on the cluster, and a ModelKit packed in a Job there would vanish with its "
                "pod: use ModelKitPackAndPushOperator, which packs and pushes in one Job"
            )
        return self._return(ref, self._pack(ref, context))


class ModelKitPushOperator(_ModelKitBase):
    """Push ``reference`` from the local ModelKit store to its registry."""

    def execute(self, context: Any) -> dict[str, Any]:
        ref = self._check()
        self._preflight()
        if self.mode == "job":
            raise AirflowException(
                "ModelKitPushOperator pushes from this worker's store; mode='job' needs "
                "ModelKitPackAndPushOperator with a pvc:// source"
            )
        return self._return(ref, self._push(ref, context))


class ModelKitPackAndPushOperator(_ModelKitBase):
    """Pack ``source`` and push it to ``reference`` in one task.

    :param stream: pack straight into the registry, as ``kit pack --push``: no copy of the layers in
        the worker's ModelKit store, no extra disk (native engine only).
    """

    def __init__(self, *, stream: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stream = stream

    def execute(self, context: Any) -> dict[str, Any]:
        ref = self._check()
        self._preflight()
        if self._runs_as_job():
            return self._return(ref, self._pack_and_push_in_job(ref, context))
        if self.stream:
            return self._return(ref, self._stream(ref, context))
        self._pack(ref, context)
        return self._return(ref, self._push(ref, context))

    def _stream(self, ref: Reference, context: Any) -> dict[str, Any]:
        if self.engine != "native":
            raise AirflowException("stream=True packs with the native engine; use engine='native'")
        if not self.source:
            raise AirflowException("source is required to pack (a directory or pvc://<claim>/<path>)")
        try:
            directory = resolve_source(self.source, self.namespace, cluster=not targets_embedded(self._conn_id()))
        except (ClusterModeUnavailableError, ValueError) as exc:
            raise AirflowException(str(exc)) from None
        self.log.info("Packing %s straight into %s (no local copy)", directory, ref)
        try:
            with self._client(ref) as client:
                res = packpush.pack_and_push(
                    directory,
                    ref,
                    client,
                    kitfile=self.kitfile,
                    compression=self.compression,
                    modelpack=self.modelpack,
                    layer_format=self.layer_format,
                )
        except (KitfileError, RegistryError, StoreError, FileNotFoundError, ValueError) as exc:
            raise AirflowException(str(exc)) from None
        result = {
            "digest": res.digest,
            "size": res.size,
            "layers": [x.to_json() for x in res.layers],
            "uploaded": res.transferred,
        }
        self._xcom(context, ref, result)
        self._sign_and_attest(ref, context, result)
        self._asset_event(context, ref, result)
        return result
