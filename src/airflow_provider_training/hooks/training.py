"""``TrainingHook`` / ``AsyncTrainingHook``: the one way the Airflow layer reaches a cluster.

Both take ``kubernetes_conn_id``, a connection of cncf.kubernetes' ``kubernetes`` type (in-cluster,
kubeconfig path or content, context, namespace):

- :data:`DEFAULT` (the default): the provider option ``[training] kubernetes_conn_id``, read when the
  hook is built — at run time, in the worker or the triggerer, never when a DAG file is parsed;
- a connection id: that connection;
- ``None`` or ``""``: the embedded control plane of this machine (``[training] embedded_home``),
  started on demand; inside a pod *of* an embedded control plane (a KubernetesExecutor worker on
  it), that control plane, through the pod's in-cluster configuration (:func:`in_embedded_pod`).

So a DAG moves from a laptop to a cluster by configuration, not by editing it. The operators,
triggers and the UI build their clients from these hooks only; the UI asks for
``lookup_only=True``: a read-only page may find the embedded control plane, never start it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import json
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook, KubernetesHook
from airflow.sdk import conf

from airflow_provider_training import embedded
from airflow_provider_training.client import AsyncTrainingJobClient, TrainingJobClient
from airflow_provider_training.client.informer import SHARED, Deliver, Subscription
from airflow_provider_training.client.state import finished

EMBEDDED_NAMESPACE = "default"


class _Default:
    """The type of :data:`DEFAULT`: one instance, kept across copies and pickles (Airflow deep-copies
    operators and their template fields), so ``is DEFAULT`` and ``isinstance`` both hold."""

    _instance: _Default | None = None

    def __new__(cls) -> _Default:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<[training] kubernetes_conn_id>"

    def __reduce__(self) -> str:
        return "DEFAULT"  # pickle and copy find the module's singleton by name


DEFAULT: Any = _Default()
"""``kubernetes_conn_id=DEFAULT``: the configured connection (``[training] kubernetes_conn_id``),
resolved when the hook is built."""

ConnId = str | _Default | None


class ClusterUnavailable(RuntimeError):
    """The cluster cannot be reached; the message says why and what to do."""


def embedded_home() -> str | None:
    """``[training] embedded_home`` (``None``: ``$AIRFLOW_TRAINING_HOME``, else ``~/.airflow-training``)."""
    return conf.get("training", "embedded_home", fallback="") or None


def in_embedded_pod() -> bool:
    """Whether this process runs in a pod of an embedded control plane: in-cluster configuration is
    there (the ``kubernetes`` Service's address and the service account's token, what
    ``load_incluster_config`` reads) and the API it names is on this machine's loopback, where only
    an embedded control plane serves pods (a cluster's ``kubernetes`` Service is a ClusterIP).

    There "no connection" cannot mean starting an embedded control plane — the pod's sandbox hides
    every data directory — and the control plane meant is the one the pod runs on. Anywhere else,
    a pod of a real cluster included (a CI runner's, say), it keeps meaning the embedded control
    plane of this machine; a worker on a cluster names its cluster with a ``kubernetes`` connection
    (``in_cluster``; docs/cluster.md)."""
    from kubernetes.config.incluster_config import SERVICE_HOST_ENV_NAME, SERVICE_TOKEN_FILENAME

    host = os.environ.get(SERVICE_HOST_ENV_NAME, "")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
    return loopback and os.path.isfile(SERVICE_TOKEN_FILENAME)


def targets_embedded(conn_id: str | None) -> bool:
    """Whether a hook for ``conn_id`` (already resolved) reaches the embedded control plane through
    its data directory — what reads a claim's directory or starts the daemon may run — rather than
    through the API only (a connection, or in-cluster configuration in a pod of the control plane)."""
    return conn_id is None and not in_embedded_pod()


def resolve_conn_id(kubernetes_conn_id: ConnId) -> str | None:
    """The connection to use; ``None`` means the embedded control plane."""
    if isinstance(kubernetes_conn_id, _Default):
        kubernetes_conn_id = conf.get("training", "kubernetes_conn_id", fallback="")
    return kubernetes_conn_id or None


def embedded_control_plane() -> embedded.ControlPlane:
    """The embedded control plane of ``[training] embedded_home``, started if it does not run (with
    ``[training] embedded_authorization``, when set, as its authorization mode, and
    ``[training] embedded_runtime`` as its node's runtime)."""
    mode = conf.get("training", "embedded_authorization", fallback="")
    runtime = conf.get("training", "embedded_runtime", fallback="")
    env = {"AIRFLOW_TRAINING_AUTHORIZATION": mode} if mode else {}
    if runtime:  # oci: replicas run their images with runc (docs/embedded.md, "Real images")
        env["AIRFLOW_TRAINING_RUNTIME"] = runtime
    return embedded.ensure_running(embedded_home(), env or None)


def running_control_plane_kubeconfig() -> str:
    """The kubeconfig of the embedded control plane if it runs and answers; never starts it.
    Raises :class:`ClusterUnavailable` (with how to start it) otherwise."""
    home = embedded_home()
    state = embedded.status(home)
    if not state.ready:
        where = home or "the default home ($AIRFLOW_TRAINING_HOME or ~/.airflow-training)"
        raise ClusterUnavailable(
            f"the embedded control plane in {where} is {state.message}; "
            "start it with `airflow-training embedded start` (or run a training task)"
        )
    return str(state.kubeconfig)


class TrainingHook(KubernetesHook):
    """Sync hook: ``get_client()`` gives a :class:`TrainingJobClient` for the resolved cluster."""

    hook_name = "Kubeflow Training (Kubernetes cluster)"

    def __init__(self, kubernetes_conn_id: ConnId = DEFAULT, *, lookup_only: bool = False, **kwargs: Any) -> None:
        conn_id = resolve_conn_id(kubernetes_conn_id)
        self.embedded = targets_embedded(conn_id)
        if conn_id is None and not self.embedded:
            kwargs.setdefault("in_cluster", True)  # a pod of the embedded control plane: that plane
        super().__init__(conn_id=conn_id, kubernetes_conn_id=conn_id, **kwargs)
        self.kubernetes_conn_id = conn_id
        self.lookup_only = lookup_only

    def _embedded_kubeconfig(self) -> str:
        if self.config_file is None:
            self.config_file = (
                running_control_plane_kubeconfig() if self.lookup_only else str(embedded_control_plane().kubeconfig)
            )
        return str(self.config_file)

    def get_conn(self) -> Any:
        if self.embedded:
            self._embedded_kubeconfig()
        return super().get_conn()

    def get_client(self, *, watch_timeout: float = 240.0, poll_interval: float = 10.0) -> TrainingJobClient:
        return TrainingJobClient(self.api_client, watch_timeout=watch_timeout, poll_interval=poll_interval)

    def get_namespace(self) -> str | None:
        return EMBEDDED_NAMESPACE if self.embedded else super().get_namespace()

    @property
    def api_url(self) -> str:
        """The API server's base URL (for links to jobs)."""
        return str(self.api_client.configuration.host).rstrip("/")

    def trigger_connection(self) -> dict[str, Any]:
        """What a trigger needs to reach the same cluster without this worker's environment:
        the connection's extras resolved here (for the embedded control plane: its kubeconfig path)."""
        if self.embedded:
            return {"kubernetes_conn_id": None, "connection_extras": {"kube_config_path": self._embedded_kubeconfig()}}
        if self.kubernetes_conn_id is None:
            # A pod of the embedded control plane: the triggerer's own "no connection" is the same
            # plane (its in-cluster configuration in a pod, else this machine's embedded one); this
            # pod's "in_cluster" would not be, for a triggerer outside the cluster.
            return {"kubernetes_conn_id": None, "connection_extras": None}
        return {"kubernetes_conn_id": self.kubernetes_conn_id, "connection_extras": dict(self.conn_extras)}


class AsyncTrainingHook(AsyncKubernetesHook):
    """Async twin for triggers and the UI: ``async with hook.get_client() as client``.

    ``connection_extras`` (from :meth:`TrainingHook.trigger_connection`) stand in for the
    connection's; ``lookup_only``: an embedded control plane that does not run raises
    :class:`ClusterUnavailable` instead of being started."""

    hook_name = "Kubeflow Training (Kubernetes cluster, async)"

    def __init__(
        self,
        kubernetes_conn_id: ConnId = DEFAULT,
        connection_extras: dict[str, Any] | None = None,
        *,
        lookup_only: bool = False,
        **kwargs: Any,
    ) -> None:
        conn_id = resolve_conn_id(kubernetes_conn_id)
        self.embedded = targets_embedded(conn_id) and not connection_extras
        if conn_id is None and not connection_extras and not self.embedded:
            kwargs.setdefault("in_cluster", True)  # a pod of the embedded control plane (see TrainingHook)
        super().__init__(conn_id=conn_id, kubernetes_conn_id=conn_id, connection_extras=connection_extras, **kwargs)
        self.lookup_only = lookup_only

    async def _embedded_extras(self) -> dict[str, Any]:
        # Both may touch the file system or start the daemon: in a thread, never on the event loop.
        if self.lookup_only:
            return {"kube_config_path": await asyncio.to_thread(running_control_plane_kubeconfig)}
        plane = await asyncio.to_thread(embedded_control_plane)
        return {"kube_config_path": str(plane.kubeconfig)}

    @contextlib.asynccontextmanager
    async def get_client(
        self, *, watch_timeout: float = 240.0, poll_interval: float = 10.0
    ) -> AsyncIterator[AsyncTrainingJobClient]:
        if self.embedded and self._extras is None:
            self._extras = await self._embedded_extras()
        async with self.get_conn() as api:
            yield AsyncTrainingJobClient(api, watch_timeout=watch_timeout, poll_interval=poll_interval)

    # -- shared watches (``client.informer``): one per cluster, namespace and kind in this process ----
    def cluster_identity(self) -> str:
        """Names this hook's cluster for shared watches: a digest of the connection id and the extras
        given (they may hold credentials, so never the extras themselves)."""
        raw = json.dumps([self.conn_id, self._extras, self.lookup_only], sort_keys=True, default=str)
        return hashlib.sha256(raw.encode()).hexdigest()

    async def wait(
        self,
        kind: str,
        name: str,
        namespace: str,
        *,
        uid: str | None = None,
        timeout: float | None = None,
        until: Callable[[dict[str, Any]], bool] = finished,
        watch_timeout: float = 240.0,
        poll_interval: float = 10.0,
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """:meth:`AsyncTrainingJobClient.wait` through the process's shared watch of ``kind`` in
        ``namespace`` on this cluster (the first waiter's ``watch_timeout`` / ``poll_interval`` are
        the shared watch's); ``on_change`` sees each version of the object."""
        return await SHARED.wait(
            self.cluster_identity(),
            lambda: self.get_client(watch_timeout=watch_timeout, poll_interval=poll_interval),
            kind,
            name,
            namespace,
            uid=uid,
            timeout=timeout,
            until=until,
            on_change=on_change,
        )

    def subscribe(
        self,
        kind: str,
        namespace: str,
        *,
        name: str | None = None,
        deliver: Deliver | None = None,
        watch_timeout: float = 240.0,
    ) -> contextlib.AbstractAsyncContextManager[Subscription]:
        """Subscribe to the changes of ``kind`` objects (``name``: of that one) in ``namespace``
        through the process's shared watch (``client.informer.Informers.subscribe``)."""
        return SHARED.subscribe(
            self.cluster_identity(),
            lambda: self.get_client(watch_timeout=watch_timeout),
            kind,
            namespace,
            name=name,
            deliver=deliver,
        )
