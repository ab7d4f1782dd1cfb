"""``InferenceServiceOperator``: deploy a ModelKit as a KServe InferenceService and wait until the new
model serves.

Creates the InferenceService, or updates the one of that name (a rollout: on KServe and on the
embedded control plane the old model keeps serving until the new one is ready), with
``storageUri: kit://<reference>`` — on a cluster this needs KitOps' ``ClusterStorageContainer``
(``docs/cluster.md``). With ``registry_conn_id`` the registry's credentials go into a Secret
(``storage_secret_name``; keys ``KIT_USER``, ``KIT_PASSWORD``, ``KIT_UNPACK_FLAGS``, ``KIT_CA_CERT``)
that the storage initializer reads; they never reach the task log, argv or XCom.

XCom: ``inference_service_name``, ``inference_service_namespace``, ``inference_service_uid`` as soon
as the object is applied, ``url`` once ready; the return value is
``{name, namespace, uid, url, storage_uri, revision}``.

Failure: the task fails with KServe's reason and message (``modelStatus.lastFailureInfo``) and the
predictor's log tail (storage-initializer and serving container), after ``on_failure_action``:
``rollback`` (default: the previous spec is put back, or an InferenceService this task created is
deleted), ``delete`` or ``keep``. ``on_kill_action`` does the same when a user kills the task
(also while deferred, through the trigger's ``on_kill``, on Airflow 3.3+).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, NoReturn

import yaml
from airflow.sdk import BaseOperator, conf
from airflow.sdk.exceptions import AirflowException

from airflow_provider_training import compat, xcom
from airflow_provider_training.client.errors import ApiError, JobDeleted, WaitTimeout
from airflow_provider_training.client.inferenceservice import (
    KIND,
    RolloutState,
    manifest,
    rollout_state,
    served_storage_uri,
    storage_uri,
)
from airflow_provider_training.client.sync import TrainingJobClient
from airflow_provider_training.hooks.training import DEFAULT, TrainingHook
from airflow_provider_training.specs.actions import RolloutAction
from airflow_provider_training.triggers.deploy import InferenceServiceTrigger

ISVC_LABEL = "serving.kserve.io/inferenceservice"
LOG_CONTAINERS = ("storage-initializer", "kserve-container")
ROLLOUT_ACTIONS = tuple(RolloutAction)  # str-valued: the strings users write are members


def api_client(kubernetes_conn_id: str | None) -> Any:
    """A ``kubernetes`` ApiClient for the connection, or for the embedded control plane (started on
    demand) when there is none: :class:`TrainingHook`'s (kept for DAGs written against it)."""
    return TrainingHook(kubernetes_conn_id=kubernetes_conn_id).api_client


def deployed_storage_uri(name: str, namespace: str = "default", kubernetes_conn_id: str | None = None) -> str | None:
    """The ``kit://`` URI InferenceService ``namespace/name`` serves now (its spec's storageUri), or
    None when it does not exist — what a retraining DAG compares a new model against.
    ``kubernetes_conn_id``: as :class:`TrainingHook` takes it (``None``: the embedded control plane,
    :data:`DEFAULT`: ``[training] kubernetes_conn_id``)."""
    client = TrainingHook(kubernetes_conn_id=kubernetes_conn_id).get_client()
    return served_storage_uri(client.find(KIND, name, namespace))


def _generation(obj: dict[str, Any]) -> int:
    return int(obj["metadata"].get("generation") or 1)


class InferenceServiceOperator(BaseOperator):
    """Deploy ``storage_uri`` (a ModelKit reference or ``kit://`` URI) as InferenceService ``name``.

    :param name: the InferenceService's name (its model is served under this name).
    :param storage_uri: ModelKit to serve, e.g. ``{{ ti.xcom_pull('package', key='reference') }}``.
    :param namespace: namespace of the InferenceService.
    :param model_format: ``spec.predictor.model.modelFormat.name`` (``pytorch`` = TorchScript).
    :param inference_service: a full manifest (dict, YAML text or ``.yaml`` file) for anything more
        (resources, custom ``containers``, runtime); ``storage_uri`` replaces its storage URI.
    :param registry_conn_id: ``modelkit_registry`` connection whose credentials the predictor pulls with.
    :param storage_secret_name: Secret those credentials are written to (a cluster's
        ClusterStorageContainer refers to it by this name).
    :param kubernetes_conn_id: ``kubernetes`` connection. Default (:data:`DEFAULT`, or ``None`` as
        before): the provider option ``[training] kubernetes_conn_id``, read when the task runs;
        empty (there or here) means the embedded control plane of this machine, started on demand.
    :param wait_for_ready: wait until the new model serves (else return once applied).
    :param deferrable: wait in the triggerer instead of a worker slot.
    :param timeout: seconds to wait for readiness.
    :param poll_interval: seconds between status reads where the API server cannot watch.
    :param on_failure_action: ``rollback`` | ``delete`` | ``keep`` when the rollout fails or times out.
    :param on_kill_action: ``rollback`` | ``delete`` | ``keep`` when a user kills the task.
    :param log_tail_lines: lines of each predictor container's log in the failure message.
    :param verify: refuse to deploy a ModelKit that is not signed by the expected key: ``True`` (key
        from ``verify_key`` or ``signing_conn_id``) or the public key itself (path or PEM text).
        ``None`` (the default): verify exactly when ``signing_conn_id`` or ``verify_key`` is set
        (after templating, so ``"{{ params.signing_conn_id }}"`` turns it on per run); ``False``:
        never. The verified digest is what gets deployed (``ref@sha256:…``), so a tag moved
        afterwards cannot swap the model.
    :param verify_key: public key (cosign.pub path or PEM, or an X.509 certificate) for ``verify``.
    :param signing_conn_id: ``modelkit_signing`` connection whose public key ``verify`` uses.
    :param require_provenance: with ``verify``, also require a provenance attestation by that key.
    :param verify_layers: with ``verify``, stream every layer from the registry and check its digest.
    """

    template_fields: Sequence[str] = (
        "name",
        "namespace",
        "storage_uri",
        "model_format",
        "inference_service",
        "registry_conn_id",
        "storage_secret_name",
        "kubernetes_conn_id",
        "verify_key",
        "signing_conn_id",
    )
    template_ext: Sequence[str] = (".yaml", ".yml")
    template_fields_renderers = {"inference_service": "yaml"}
    ui_color = "#fde9d9"

    def __init__(
        self,
        *,
        name: str,
        storage_uri: str | None = None,
        namespace: str = "default",
        model_format: str = "pytorch",
        inference_service: dict[str, Any] | str | None = None,
        registry_conn_id: str | None = None,
        storage_secret_name: str = "kitops-credentials",
        kubernetes_conn_id: str | None = DEFAULT,
        wait_for_ready: bool = True,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        timeout: float = 900.0,
        poll_interval: float = 10.0,
        on_failure_action: str = "rollback",
        on_kill_action: str = "rollback",
        log_tail_lines: int = 30,
        verify: bool | str | None = None,
        verify_key: str | None = None,
        signing_conn_id: str | None = None,
        require_provenance: bool = False,
        verify_layers: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for field, value in (("on_failure_action", on_failure_action), ("on_kill_action", on_kill_action)):
            if value not in ROLLOUT_ACTIONS:
                raise ValueError(f"{field}={value!r}: use one of {', '.join(ROLLOUT_ACTIONS)}")
        self.name = name
        self.storage_uri = storage_uri
        self.namespace = namespace
        self.model_format = model_format
        self.inference_service = inference_service
        self.registry_conn_id = registry_conn_id
        self.storage_secret_name = storage_secret_name
        # None meant "the configured connection" here (unlike TrainingHook, where it is the embedded
        # plane): it stays so, resolved at run time like DEFAULT, not when the DAG file is parsed.
        self.kubernetes_conn_id = DEFAULT if kubernetes_conn_id is None else kubernetes_conn_id
        self.wait_for_ready = wait_for_ready
        self.deferrable = deferrable
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.on_failure_action = on_failure_action
        self.on_kill_action = on_kill_action
        self.log_tail_lines = log_tail_lines
        if isinstance(verify, str) and verify:
            verify_key, verify = verify_key or verify, True
        self.verify = verify if verify is None else bool(verify)
        self.verify_key = verify_key
        self.signing_conn_id = signing_conn_id
        self.require_provenance = require_provenance
        self.verify_layers = verify_layers
        self._applied: tuple[str, dict[str, Any] | None] | None = None  # (uid, previous spec) for on_kill
        self._lineage: dict[str, Any] | None = None  # what the OpenLineage facets report, once served
        self._progress: tuple[str, str] | None = None  # the (reason, message) last logged by the sync path

    # -- plumbing ---------------------------------------------------------------------------------
    def hook(self) -> TrainingHook:
        return TrainingHook(kubernetes_conn_id=self.kubernetes_conn_id)

    def client(self, hook: TrainingHook | None = None) -> TrainingJobClient:
        return (hook or self.hook()).get_client(poll_interval=self.poll_interval)

    # -- building ----------------------------------------------------------------------------------
    def _base(self) -> dict[str, Any] | None:
        doc = self.inference_service
        if doc is None or isinstance(doc, dict):
            return doc
        try:
            loaded = yaml.safe_load(doc)
        except yaml.YAMLError as exc:
            raise AirflowException(f"inference_service is not valid YAML: {exc}") from None
        if not isinstance(loaded, dict):
            raise AirflowException("inference_service must be a mapping (an InferenceService manifest)")
        return loaded

    def build(self) -> dict[str, Any]:
        try:
            uri = storage_uri(self.storage_uri) if self.storage_uri else None
            return manifest(
                self.name,
                self.namespace,
                storage_uri=uri,
                model_format=self.model_format,
                base=self._base(),
                storage_secret=self.storage_secret_name if self.registry_conn_id else None,
                labels={"app.kubernetes.io/managed-by": "airflow-provider-training"},
            )
        except ValueError as exc:
            raise AirflowException(str(exc)) from None

    def _secret(self) -> dict[str, Any] | None:
        if not self.registry_conn_id:
            return None
        from airflow_provider_training.hooks.registry import ModelKitRegistryHook

        data = ModelKitRegistryHook(self.registry_conn_id).secret_data()
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": self.storage_secret_name,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "airflow-provider-training"},
            },
            "stringData": data,
        }

    # -- applying ----------------------------------------------------------------------------------
    def apply_secret(self, client: TrainingJobClient) -> None:
        """Write the registry connection's credentials into ``storage_secret_name`` (if a connection is set)."""
        secret = self._secret()
        if secret is not None:
            client.apply_secret(secret)

    def apply(self, client: TrainingJobClient, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Create or update; returns the stored object and the previous spec (None when created)."""
        self.apply_secret(client)
        current = client.find(KIND, self.name, self.namespace)
        if current is None:
            self.log.info("Creating InferenceService %s/%s serving %s", self.namespace, self.name, self.storage_uri)
            return client.create(body, self.namespace), None
        previous = {"spec": current.get("spec") or {}, "annotations": current["metadata"].get("annotations") or {}}
        current["spec"] = body["spec"]
        annotations = current["metadata"].setdefault("annotations", {})
        annotations.update(body["metadata"].get("annotations") or {})
        current["metadata"].setdefault("labels", {}).update(body["metadata"].get("labels") or {})
        self.log.info("Updating InferenceService %s/%s to serve %s", self.namespace, self.name, self.storage_uri)
        return client.replace(current), previous

    def verify_signature(self, context: Any) -> None:
        """Check the ModelKit's cosign signature (and layers, provenance) before anything is applied;
        pin ``storage_uri`` to the verified digest. Fails the task with the reason; nothing deployed."""
        from airflow_provider_training.operators.deploy_verify import verify_modelkit

        if not self.storage_uri:
            raise AirflowException("verify=True needs storage_uri (the ModelKit to deploy)")
        pinned, result = verify_modelkit(
            str(self.storage_uri),
            registry_conn_id=self.registry_conn_id,
            verify_key=self.verify_key,
            signing_conn_id=self.signing_conn_id,
            require_provenance=self.require_provenance,
            check_layers=self.verify_layers,
        )
        self.log.info(
            "Signature of %s verified (%d signature(s), %d blobs checked%s)",
            pinned,
            result.signatures,
            result.layers_checked,
            ", provenance signed by the same key" if result.provenance else "",
        )
        self.storage_uri = pinned
        context["ti"].xcom_push(key=xcom.VERIFIED_DIGEST, value=result.digest)

    def _verifies(self) -> bool:
        """``verify``: on, off, or (None) on exactly when a key is named (after templating)."""
        return bool(self.verify or (self.verify is None and (self.signing_conn_id or self.verify_key)))

    def remember(self, context: Any, obj: dict[str, Any], previous: dict[str, Any] | None) -> None:
        """XCom and the undo record, before any waiting: a crash or kill still leaves the trail."""
        uid = obj["metadata"]["uid"]
        self._applied = (uid, previous)
        ti = context["ti"]
        ti.xcom_push(key=xcom.INFERENCE_SERVICE_NAME, value=self.name)
        ti.xcom_push(key=xcom.INFERENCE_SERVICE_NAMESPACE, value=self.namespace)
        ti.xcom_push(key=xcom.INFERENCE_SERVICE_UID, value=uid)

    # -- execute: verify and apply, then wait here (execute_sync) or in the triggerer (execute_async,
    # resumed in trigger_reentry), as the training operator does ------------------------------------

    def execute(self, context: Any) -> dict[str, Any]:
        if self._verifies():
            self.verify_signature(context)
        body = self.build()
        hook = self.hook()
        client = self.client(hook)
        obj, previous = self.apply(client, body)
        self.remember(context, obj, previous)
        if not self.wait_for_ready:
            return self._result(rollout_state(obj, _generation(obj)), obj["metadata"]["uid"], context)
        if self.deferrable:
            self.execute_async(hook, obj, previous)
        return self.execute_sync(context, client, obj, previous)

    def execute_sync(
        self, context: Any, client: TrainingJobClient, obj: dict[str, Any], previous: dict[str, Any] | None
    ) -> dict[str, Any]:
        """Wait in this worker until the new model serves (or the rollout fails), then finish."""
        uid, generation = obj["metadata"]["uid"], _generation(obj)
        self._progress = None
        try:
            obj = client.wait(
                KIND,
                self.name,
                self.namespace,
                uid=uid,
                timeout=self.timeout,
                until=lambda o: rollout_state(o, generation).finished,
                on_change=lambda o: self._changed(o, generation),
            )
        except WaitTimeout as exc:
            state = rollout_state(exc.last or {}, generation)
            self._fail(client, uid, previous, f"did not become ready within {self.timeout:g}s", state)
        except JobDeleted as exc:
            raise AirflowException(str(exc)) from None
        return self.finish(context, client, uid, previous, rollout_state(obj, generation))

    def execute_async(self, hook: TrainingHook, obj: dict[str, Any], previous: dict[str, Any] | None) -> NoReturn:
        """Free the worker slot: :class:`InferenceServiceTrigger` waits in the triggerer (reaching the
        cluster with the connection as resolved here); the task resumes in :meth:`trigger_reentry`."""
        if unsupported := compat.deferred_kill_unsupported(self.on_kill_action):
            self.log.warning("%s", unsupported)
        self.defer(
            trigger=InferenceServiceTrigger(
                name=self.name,
                namespace=self.namespace,
                uid=obj["metadata"]["uid"],
                generation=_generation(obj),
                **hook.trigger_connection(),
                timeout=self.timeout,
                poll_interval=self.poll_interval,
                started=time.time(),
                on_kill_action=self.on_kill_action,
                previous=previous,
            ),
            method_name="trigger_reentry",
            kwargs={"previous": previous},
            timeout=timedelta(seconds=self.timeout + 60),
        )

    def trigger_reentry(
        self, context: Any, event: dict[str, Any], previous: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Resume after deferral: finish like the sync path with the trigger's verdict."""
        status = event.get("status")
        uid = str(event.get("uid"))
        state = RolloutState(True, status == "ready", event.get("reason", ""), event.get("message", ""),
                             event.get("url", ""), event.get("revision", ""))  # fmt: skip
        if status == "deleted":
            raise AirflowException(str(event.get("message") or "the InferenceService was deleted"))
        if status == "timeout":
            self._fail(self.client(), uid, previous, f"did not become ready within {self.timeout:g}s", state)
        return self.finish(context, None, uid, previous, state)

    def execute_complete(
        self, context: Any, event: dict[str, Any], previous: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Resume a deferral recorded before :meth:`trigger_reentry` was the resume method."""
        return self.trigger_reentry(context, event, previous)

    def finish(
        self,
        context: Any,
        client: TrainingJobClient | None,
        uid: str,
        previous: dict[str, Any] | None,
        state: RolloutState,
    ) -> dict[str, Any]:
        """The result of a ready rollout; a failed one fails the task after ``on_failure_action``."""
        if not state.ready:
            self._fail(client or self.client(), uid, previous, "failed", state)
        return self._result(state, uid, context)

    def _changed(self, obj: dict[str, Any], generation: int) -> None:
        """Each new version of the InferenceService while the sync path waits: log what changed."""
        state = rollout_state(obj, generation)
        if (state.reason, state.message) != self._progress:
            self._progress = (state.reason, state.message)
            if not state.finished:
                self.log.info("Waiting for %s/%s: %s %s", self.namespace, self.name, state.reason, state.message)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage: the ModelKit in, the InferenceService revision out."""
        from airflow_provider_training.operators.lineage import deploy_lineage

        return deploy_lineage(self)

    def _result(self, state: RolloutState, uid: str, context: Any) -> dict[str, Any]:
        self._lineage = {
            "name": self.name,
            "namespace": self.namespace,
            "storage_uri": storage_uri(self.storage_uri) if self.storage_uri else None,
            "revision": state.revision,
            "url": state.url,
        }
        if state.url:
            context["ti"].xcom_push(key=xcom.URL, value=state.url)
            self.log.info(
                "InferenceService %s/%s serves %s at %s", self.namespace, self.name, self.storage_uri, state.url
            )
        return {
            "name": self.name,
            "namespace": self.namespace,
            "uid": uid,
            "url": state.url,
            "storage_uri": storage_uri(self.storage_uri) if self.storage_uri else None,
            "revision": state.revision,
        }

    # -- failure and cleanup ---------------------------------------------------------------------
    def log_tail(self, client: TrainingJobClient, revision: str | None = None) -> str:
        """The newest predictor pod's container logs (last ``log_tail_lines`` each)."""
        try:
            pods = client.list_pods(self.namespace, f"{ISVC_LABEL}={self.name}")
        except ApiError as exc:  # the failure message matters more than the tail
            return f"(could not list the predictor pods: {exc})"
        pods.sort(key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))  # RFC 3339: sorts as text
        if revision:
            pods = [p for p in pods if p["metadata"]["name"] == revision] or pods
        if not pods:
            return "(no predictor pod)"
        pod = pods[-1]
        name = pod["metadata"]["name"]
        spec = pod.get("spec") or {}
        names = [c["name"] for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
        parts = []
        for container in [c for c in LOG_CONTAINERS if c in names] or names:
            try:
                text = client.read_log(name, self.namespace, container=container, tail_lines=self.log_tail_lines)
            except ApiError:  # a container that never started has no log
                continue
            if text.strip():
                parts.append(f"--- {name} [{container}] ---\n{text.rstrip()}")
        return "\n".join(parts) or f"(pod {name} has no log output)"

    def _fail(
        self, client: TrainingJobClient, uid: str, previous: dict[str, Any] | None, what: str, state: RolloutState
    ) -> NoReturn:
        obj = client.find(KIND, self.name, self.namespace) or {}
        revision = ((obj.get("status") or {}).get("components") or {}).get("predictor", {}).get("latestCreatedRevision")
        tail = self.log_tail(client, revision)
        reason = f"{state.reason}: {state.message}" if state.message else state.reason or "unknown reason"
        self.log.error("Predictor log tail:\n%s", tail)
        self.log.info("%s", self.cleanup(client, uid, previous, self.on_failure_action))
        raise AirflowException(
            f"InferenceService {self.namespace}/{self.name} {what}: {reason}\nPredictor log tail:\n{tail}"
        )

    def cleanup(self, client: TrainingJobClient, uid: str, previous: dict[str, Any] | None, action: str) -> str:
        """Apply ``action`` (a :class:`RolloutAction`) to what this task applied; returns what was done."""
        if action == RolloutAction.KEEP:
            return f"on_failure/kill action 'keep': left InferenceService {self.namespace}/{self.name} as it is"
        if action == RolloutAction.DELETE or previous is None:
            client.delete(KIND, self.name, self.namespace, uid=uid, propagation="Background")
            return f"deleted InferenceService {self.namespace}/{self.name}"
        current = client.get(KIND, self.name, self.namespace)
        current["spec"] = previous.get("spec") or {}
        current["metadata"]["annotations"] = previous.get("annotations") or {}
        client.replace(current)
        return f"rolled InferenceService {self.namespace}/{self.name} back to its previous spec"

    def on_kill(self) -> None:
        if self._applied is None or self.on_kill_action == RolloutAction.KEEP:
            return
        uid, previous = self._applied
        client = self.client()
        self.log.info("%s", self.cleanup(client, uid, previous, self.on_kill_action))
