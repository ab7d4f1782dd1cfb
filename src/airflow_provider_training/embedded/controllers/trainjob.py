"""The TrainJob controller (Kubeflow Trainer v2.3.0, ``trainer.kubeflow.org/v1alpha1``) on the
controller runtime.

A pass: resolve the runtime — from the TrainJob's runtime snapshot ``<tj>-runtime-snapshot``, taken
from the referenced (Cluster)TrainingRuntime on the first build, so later runtime edits never reach
it —, build the JobSet (and the status server's CA ConfigMap, for MPI the SSH Secret and hostfile
ConfigMap) with ``frameworks.trainer.build`` — runtime patches, the mlPolicy plugins' environment,
the ``TrainJobStatus`` plugin's env and token volume, initializers ordered before the trainer by
the runtime's ``dependsOn`` —, create what is missing; while the TrainJob or its JobSet is
suspended, build and apply the JobSet again (so ``suspend`` and changed ``runtimePatches`` reach it,
within what JobSet's webhook lets change); then the status step (``frameworks.trainer.status``:
``Suspended``/``Resumed``, ``Complete``/``Failed`` and ``jobsStatus`` copied from the JobSet,
``activeDeadlineSeconds`` → ``Failed/DeadlineExceeded`` and the JobSet deleted). ``trainerStatus``
is the status server's (``apiserver/statusserver.py``); this controller keeps whatever it wrote.
Deleting the TrainJob garbage-collects JobSet → Jobs → Pods by ownerReferences.

Embedded differences: the rendezvous port 29500 (``PET_MASTER_PORT``, ``JAX_COORDINATOR_ADDRESS``,
``DMLC_TRACKER_PORT`` and the container port) is replaced by a free port reserved for the TrainJob,
so concurrent jobs on one machine never collide; pod DNS names become loopback addresses
(``controllers/jobset.py``). A build error (e.g. a torchtune command) fails the TrainJob with reason
``TrainJobResourcesCreationFailed`` instead of retrying forever. Initializers: Kubeflow's
initializer images run ``embedded/workloads/trainer_initializer.py`` (``kit://``, ``pvc://``, local
paths); an ``hf://`` or ``s3://`` storageUri fails the TrainJob at once with reason
``InitializerNotSupported`` and a message saying what works instead. MPI: no sshd here, so
``mpirun`` on the launcher gets an rsh agent that runs ``orted`` in the node pods through the node's
exec (the v1 MPIJob's way), OpenMPI is pinned to loopback, and ``sshd`` node commands just wait.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded import kubeconfig, runtime, tls
from airflow_provider_training.embedded.controllers import jobset as jobsets
from airflow_provider_training.embedded.events import record_events
from airflow_provider_training.embedded.network import Network, shared_network
from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.resources import BY_KEY
from airflow_provider_training.embedded.runtime import ControllerContext, For, OwnerController, Owns
from airflow_provider_training.embedded.store import AlreadyExistsError, ConflictError, WatchEvent
from airflow_provider_training.embedded.trainerruntimes import snapshot_runtime
from airflow_provider_training.embedded.workloads import trainer_initializer
from airflow_provider_training.frameworks.mpi import LOCAL_PROCESS_ENV, RSH_AGENT_ENV
from airflow_provider_training.frameworks.trainer import BuildError, StatusServer, admission, build, new_ssh_key
from airflow_provider_training.frameworks.trainer.status import finished, reconcile_status, set_condition
from airflow_provider_training.specs.annotations import WORKING_DIR_ANNOTATION
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.documents import check_document
from airflow_provider_training.specs.trainer.models import TrainingRuntime, TrainJob
from airflow_provider_training.specs.unstructured import Unstructured, controlled_by

log = logging.getLogger(__name__)
TRAINJOBS = BY_KEY["trainer.kubeflow.org/trainjobs"]
JOBSETS = BY_KEY["jobset.x-k8s.io/jobsets"]
COMPONENT = "trainjob-controller"
DEFAULT_PORT = "29500"
PORT_ENVS = (c.TORCH_ENV_MASTER_PORT, c.XGBOOST_ENV_TRACKER_PORT)
ADDRESS_ENVS = (c.JAX_ENV_COORDINATOR_ADDRESS,)
CREATION_FAILED = "TrainJobResourcesCreationFailed"
# Embedded only: an initializer this node cannot run (hf://, s3://) fails the TrainJob at once.
INITIALIZER_NOT_SUPPORTED = "InitializerNotSupported"
# OpenMPI as root on one machine, over loopback only (the v1 MPIJob's node settings; the runtime's
# plugin sets keep_fqdn itself), plus the rsh agent below; the plugin's plm_rsh_args (ssh options)
# are skipped by that agent.
MPI_ENV = {k: v for k, v in LOCAL_PROCESS_ENV.items() if k != c.OPENMPI_ENV_KEEP_FQDN}
MPI_NAMESPACE_ENV = "TRAINJOB_NAMESPACE"
# The node's stdlib-only exec entry point, by path (controllers do not import the node package).
NODE_ENTRY = Path(__file__).resolve().parents[1] / "node" / "entry.py"
RSH_AGENT = """#!/bin/sh
# OpenMPI's rsh agent for TrainJobs on the embedded node (written by the TrainJob controller):
# ssh options are skipped; the host is a pod's loopback address, reached through the node's exec.
while [ "$1" = "-o" ]; do shift 2; done
HOST=$1
shift
exec "{python}" -I -S "{entry}" exec "{node_dir}" "${namespace_env}" exec "$HOST" -- /bin/sh -c "$*"
"""
INITIALIZER_IMAGES = {s: f"ghcr.io/kubeflow/trainer/{s}-initializer" for s in ("dataset", "model")}
Key = runtime.controller.Key


def _port_key(name: str) -> str:
    return f"trainjob:{name}"


def status_server(home: Home) -> StatusServer | None:
    """Trainer's status server here: the API server itself (its address and CA), which serves the
    status endpoint (``apiserver/statusserver.py``); None before the daemon wrote its kubeconfig."""
    url = kubeconfig.server_url(home)
    try:
        ca = tls.paths(home).ca.read_text()
    except OSError:
        return None
    return StatusServer(url, ca) if url else None


def localize_ports(jobset: Unstructured, network: Network) -> Unstructured:
    """Replace the rendezvous port 29500 the plugins inject by a free port reserved for the TrainJob."""
    meta = jobset["metadata"]
    port = str(network.port(meta.get("namespace", "default"), _port_key(meta["name"]), "rendezvous"))
    for rjob in jobset["spec"].get("replicatedJobs") or []:
        pod = ((rjob.get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
        for group in ("initContainers", "containers"):
            for container in pod.get(group) or []:
                for env in container.get("env") or []:
                    value = env.get("value")
                    if not isinstance(value, str):
                        continue
                    if env.get("name") in PORT_ENVS and value == DEFAULT_PORT:
                        env["value"] = port
                    elif env.get("name") in ADDRESS_ENVS and value.endswith(":" + DEFAULT_PORT):
                        env["value"] = value[: -len(DEFAULT_PORT)] + port
                for spec in container.get("ports") or []:
                    if str(spec.get("containerPort")) == DEFAULT_PORT:
                        spec["containerPort"] = int(port)
    return jobset


class TrainJobController(OwnerController):
    name = "trainjobs"
    sources = (
        For(TRAINJOBS.key),
        Owns(JOBSETS.key, owner=TRAINJOBS.key, kind=c.TRAINJOB, api_version=c.API_VERSION),
    )
    resource = TRAINJOBS.key
    managed_by = c.MANAGED_BY_CONTROLLER

    def __init__(self) -> None:
        super().__init__()
        # The last re-apply refusal reported per TrainJob (an event once, not on every pass).
        self.refusals: dict[tuple[str, str], str] = {}

    def started(self, ctx: ControllerContext) -> None:
        self.network = shared_network(ctx.home)
        self.status_server = status_server(ctx.home)

    def rsh_agent(self) -> Path:
        path = self.home.root / "node" / "bin" / "trainer-mpi-rsh"
        text = RSH_AGENT.format(
            python=sys.executable, entry=NODE_ENTRY, node_dir=self.home.root / "node", namespace_env=MPI_NAMESPACE_ENV
        )
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text)
            tmp.chmod(0o755)
            os.replace(tmp, path)
        return path

    def _on_event(self, event: WatchEvent) -> None:
        if event.type == "DELETED" and event.resource == TRAINJOBS.key:
            self.network.release_pod(event.namespace, _port_key(event.name))
            self.refusals.pop((event.namespace, event.name), None)

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key.namespace, key.name
        obj = self.current(key)
        if obj is None:
            return None
        checked = check_document(obj)
        if not isinstance(checked.object, TrainJob):  # admitted objects parse; written around the API
            log.warning("TrainJob %s/%s cannot be read: %s", namespace, name, checked.errors)
            return None
        return await TrainJobPass(self, obj, checked.object).run()


class TrainJobPass:
    def __init__(self, c: TrainJobController, obj: Unstructured, trainjob: TrainJob) -> None:
        self.c, self.store, self.obj, self.trainjob = c, c.store, obj, trainjob
        self.namespace, self.name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        self.now = datetime.now(UTC)
        self.events: list[tuple[str, str, str]] = []

    async def run(self) -> float | None:
        conditions = (self.obj.get("status") or {}).get("conditions") or []
        jobset = self.store.get(JOBSETS.key, self.namespace, self.name)
        if jobset is not None and not controlled_by(jobset, self.obj["metadata"]["uid"]):
            jobset = None  # someone else's JobSet of that name: never adopted
        if finished(conditions) and jobset is None:
            return None  # failed before a JobSet existed, or done and cleaned up: nothing to watch
        retry: float | None = None
        if not finished(conditions):
            if jobset is None:
                created, retry = self.create()
                if created is None and retry is None:
                    return None  # failed for good, status written
                jobset = created
            elif self.trainjob.spec.suspend or jobset["spec"].get("suspend"):
                # Upstream applies the JobSet again only while it or the TrainJob is suspended (so a
                # resume carries changed runtimePatches); a running JobSet is left as it is.
                jobset, retry = self.reapply(jobset)
        step = reconcile_status(self.obj, jobset, self.now)
        if step.delete_jobset and jobset is not None and not await self.delete_jobset(jobset):
            retry = 0.0  # more children than one pass deletes
        self.save(step.status)
        delays = [d for d in (step.requeue_after, retry) if d is not None]
        return min(delays) if delays else None

    def runtime(self) -> TrainingRuntime | None:
        """The runtime to build from: the TrainJob's runtime snapshot (taken now if it has none)."""
        resolved = snapshot_runtime(self.store, self.trainjob)
        if resolved.runtime is None:
            log.warning("TrainJob %s/%s: %s", self.namespace, self.name, resolved.error)
            if resolved.bad_snapshot:
                self.refused(str(resolved.error))
        return resolved.runtime

    def desired(
        self, runtime_obj: TrainingRuntime, *, new_key: bool
    ) -> tuple[dict[str, Any], list[Unstructured]] | str:
        """The JobSet as this node runs it, and the objects its pods mount (status CA, MPI hostfile and,
        with ``new_key``, the SSH Secret); or why it cannot be built."""
        framework = runtime_obj.spec.ml_policy.framework if runtime_obj.spec.ml_policy is not None else None
        try:
            built = build(
                self.trainjob,
                runtime_obj,
                ssh_key=new_ssh_key() if new_key and framework == "mpi" else None,
                status_server=self.c.status_server,
            )
        except BuildError as exc:
            return str(exc)
        checked = check_document(built.jobset)  # the JobSet webhook's and CRD defaults, as on a cluster
        if checked.errors or checked.defaulted is None:
            return "; ".join(f"{i.path}: {i.message}" for i in checked.errors)
        jobset = localize_ports(copy.deepcopy(checked.defaulted), self.c.network)
        workdir = (self.obj["metadata"].get("annotations") or {}).get(WORKING_DIR_ANNOTATION)
        if workdir:  # a node setting (the DAG folder), not an upstream annotation: carried to the pods
            jobset["metadata"].setdefault("annotations", {})[WORKING_DIR_ANNOTATION] = workdir
        self.local_initializers(jobset)
        if built.slots is not None:
            self.local_mpi(jobset)
        return jobset, [jobsets.localize(extra, jobset, self.c.network) for extra in built.objects]

    def create(self) -> tuple[Unstructured | None, float | None]:
        runtime_obj = self.runtime()
        if runtime_obj is None:
            return None, 5.0  # the runtime may still be created
        for step in ("dataset", "model"):
            uri = (((self.obj.get("spec") or {}).get("initializer") or {}).get(step) or {}).get("storageUri")
            why = trainer_initializer.unsupported(uri) if isinstance(uri, str) else None
            if why is not None:
                self.fail(INITIALIZER_NOT_SUPPORTED, f"spec.initializer.{step}.storageUri: {why}")
                return None, None
        desired = self.desired(runtime_obj, new_key=True)
        if isinstance(desired, str):
            self.fail(CREATION_FAILED, desired)
            return None, None
        jobset, extras = desired
        self.create_extras(extras)
        try:
            created = self.store.create(JOBSETS.key, jobset, owner=(TRAINJOBS.key, self.obj))
        except AlreadyExistsError:
            return self.store.get(JOBSETS.key, self.namespace, self.name), None
        self.events.append(("Normal", "SuccessfulCreate", f"Created JobSet: {self.name}"))
        return created, None

    def create_extras(self, extras: list[Unstructured]) -> None:
        for extra in extras:  # created once (the MPI Secret is immutable), before the pods that mount them
            resource = "core/configmaps" if extra["kind"] == "ConfigMap" else "core/secrets"
            with contextlib.suppress(AlreadyExistsError):
                self.store.create(resource, extra)

    def reapply(self, jobset: Unstructured) -> tuple[dict[str, Any], float | None]:
        """The JobSet built again from the runtime snapshot and the TrainJob as it is now (its
        ``suspend``, changed ``runtimePatches``), checked by JobSet's webhook as an update: while
        suspended only the pod templates' labels, annotations, nodeSelector, tolerations and
        schedulingGates may change. A refusal is a ``TrainJobResourcesCreationFailed`` event, as
        upstream's apply error; ``suspend`` is still carried then, so the TrainJob suspends or resumes."""
        runtime_obj = self.runtime()
        desired = self.desired(runtime_obj, new_key=False) if runtime_obj is not None else None
        if isinstance(desired, str):
            self.refused(desired)
        if not isinstance(desired, tuple):
            return self.sync_suspend(jobset), (5.0 if runtime_obj is None else None)
        built, extras = desired
        self.create_extras(extras)
        new = copy.deepcopy(jobset)
        new["spec"] = built["spec"]
        for part in ("labels", "annotations"):
            if built["metadata"].get(part):
                new["metadata"][part] = {**(new["metadata"].get(part) or {}), **built["metadata"][part]}
        if new == jobset:
            return jobset, None
        checked = admission.admit(new, old=jobset)  # schema, CEL and JobSet's webhook, as an update
        if checked.errors:
            listed = ", ".join(f"{i.path}: {i.message}" for i in checked.errors)
            self.refused(f'JobSet.jobset.x-k8s.io "{self.name}" is invalid: [{listed}]')
            return self.sync_suspend(jobset), None
        self.c.refusals.pop((self.namespace, self.name), None)
        return self.store.update(JOBSETS.key, new), None

    def refused(self, error: str) -> None:
        """Upstream's event for a failed build or apply (its note cut to 950 characters), once per error."""
        if self.c.refusals.get((self.namespace, self.name)) == error:
            return
        self.c.refusals[(self.namespace, self.name)] = error
        note = error if len(error) <= 950 else error[:950] + " ..."
        self.events.append(("Warning", CREATION_FAILED, f"TrainJob resources reconciliation failed: {note}"))

    def local_initializers(self, jobset: Unstructured) -> None:
        """Kubeflow's initializer images run ``trainer_initializer`` here (no image entrypoints run on
        this node), with the directory of this namespace's claims for ``pvc://`` sources."""
        claims = str(self.c.home.claim_dir(self.namespace, "x").parent)
        for rjob in jobset["spec"].get("replicatedJobs") or []:
            pod = ((rjob.get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            for container in pod.get("containers") or []:
                image = str(container.get("image") or "")
                step = next((s for s in ("dataset", "model") if image.startswith(INITIALIZER_IMAGES[s])), None)
                if step is None or container.get("command"):
                    continue
                container["command"] = [sys.executable, "-m", trainer_initializer.__name__, step]
                container.setdefault("env", []).append({"name": trainer_initializer.PVC_ROOT_ENV, "value": claims})

    def local_mpi(self, jobset: Unstructured) -> None:
        """OpenMPI without sshd: mpirun reaches the node pods through the node's exec (as the v1
        MPIJob's kubexec.sh does), over loopback; nodes that would run ``sshd`` just wait."""
        agent = self.c.rsh_agent()
        for rjob in jobset["spec"].get("replicatedJobs") or []:
            pod = ((rjob.get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            for container in pod.get("containers") or []:
                if str((container.get("command") or [""])[0]).endswith("/sshd"):
                    container["command"] = [sys.executable, "-c", "import signal; signal.pause()"]
                    container.pop("args", None)
                extra = {**MPI_ENV, RSH_AGENT_ENV: str(agent), MPI_NAMESPACE_ENV: self.namespace}
                env = [e for e in container.get("env") or [] if e.get("name") not in extra]
                container["env"] = env + [{"name": k, "value": v} for k, v in extra.items()]

    def sync_suspend(self, jobset: Unstructured) -> Unstructured:
        suspend = bool(self.trainjob.spec.suspend)
        if bool(jobset["spec"].get("suspend")) == suspend:
            return jobset
        jobset = copy.deepcopy(jobset)
        jobset["spec"]["suspend"] = suspend
        return self.store.update(JOBSETS.key, jobset)  # (read by this pass: a Conflict runs it again)

    async def delete_jobset(self, jobset: Unstructured) -> bool:
        """The JobSet and what it owns, pods first, in slow-start batches; False while more remain
        than one pass deletes."""
        children = [
            ref
            for job in self.c.store.list(
                "batch/jobs", self.namespace, label_equals=[("jobset.sigs.k8s.io/jobset-name", self.name)]
            ).items
            for ref in self.store.dependents(job["metadata"]["uid"])
        ]
        children += self.store.dependents(jobset["metadata"]["uid"])
        now, more = runtime.per_pass(children)
        await runtime.slow_start_batch(now, self.delete_quietly)
        if more:
            return False
        self.delete_quietly((JOBSETS.key, self.namespace, self.name), uid=jobset["metadata"]["uid"])
        return True

    def delete_quietly(self, ref: tuple[str, str, str], uid: str | None = None) -> None:
        with contextlib.suppress(Exception):
            self.store.delete(*ref, uid=uid)

    def fail(self, reason: str, message: str) -> None:
        status = copy.deepcopy(self.obj.get("status") or {})
        conditions = status.setdefault("conditions", [])
        set_condition(conditions, {"type": "Failed", "status": "True", "reason": reason, "message": message}, self.now)
        self.events.append(("Warning", reason, message))
        self.save(status)

    def save(self, status: dict[str, Any]) -> None:
        obj = self.obj
        if status != (self.obj.get("status") or {}):
            current = self.store.get(TRAINJOBS.key, self.namespace, self.name)
            if current is None or current["metadata"]["uid"] != self.obj["metadata"]["uid"]:
                return
            if current.get("spec") != self.obj.get("spec"):
                raise ConflictError(self.name)
            # trainerStatus belongs to whoever reports progress: keep the latest written.
            merged = dict(status)
            if "trainerStatus" in (current.get("status") or {}):
                merged["trainerStatus"] = current["status"]["trainerStatus"]
            current["status"] = merged
            obj = self.store.update(TRAINJOBS.key, current)  # (a Conflict: the pass runs again)
            self.obj = obj
        record_events(self.store, [(obj, type_, reason, message, COMPONENT) for type_, reason, message in self.events])
        self.events = []
