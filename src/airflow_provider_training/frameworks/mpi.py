"""MPIJob v1 (``training-operator.md`` §4.3): launcher env, the ``{job}-config`` ConfigMap files,
and the effective status rules (reason ``MPIJobMPIJobFailed`` included).

MPI takes its own path upstream, and every part of it is here, behind the plugin interface: no
Services, no env on workers, the launcher's ``containers[0]`` gets the ``OMPI_MCA_*`` variables and
the kubectl-delivery init container, the launcher pod is ``{job}-launcher`` (no index), workers are
created before the launcher (once), and the ConfigMap follows the running workers
(``MPIJobReconciler.ReconcilePods``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from airflow_provider_training.frameworks import labels
from airflow_provider_training.frameworks.addressing import Addressing
from airflow_provider_training.frameworks.base import (
    CLUSTER,
    ApplyConfigMap,
    CreatePod,
    DeletePod,
    EnsureObject,
    FrameworkPlugin,
    PodAction,
    Recorder,
    StatusUpdate,
    ensure_start_time,
    env,
    replicas,
    tally,
)
from airflow_provider_training.frameworks.bodies import (
    ConfigMapBody,
    ObjectMetaBody,
    RoleBindingBody,
    RoleBody,
    ServiceAccountBody,
)
from airflow_provider_training.frameworks.events import Event
from airflow_provider_training.frameworks.pods import FAILED, RUNNING, SUCCEEDED, PodState, of_type
from airflow_provider_training.specs import kinds
from airflow_provider_training.specs.common import JobStatus
from airflow_provider_training.specs.jobs import MPIJob, TrainingJob
from airflow_provider_training.specs.pod import EnvVar
from airflow_provider_training.specs.unstructured import controller_ref

LAUNCHER, WORKER = "Launcher", "Worker"

CONFIG_MOUNT_PATH = "/etc/mpi"
KUBECTL_MOUNT_PATH = "/opt/kube"
CONFIG_VOLUME = "mpi-job-config"
KUBECTL_VOLUME = "mpi-job-kubectl"
HOSTFILE = "hostfile"
KUBEXEC = "kubexec.sh"
DISCOVER_HOSTS = "discover_hosts.sh"
KUBECTL_DELIVERY_NAME = "kubectl-delivery"
RSH_AGENT_ENV = "OMPI_MCA_plm_rsh_agent"  # how mpirun reaches the workers: set on a launcher only
KUBECTL_DELIVERY_IMAGE = "kubeflow/kubectl-delivery:latest"
# OpenMPI as root in a sandbox, reaching "remote" pods over loopback only; without the pins ORTE
# sometimes picks another interface and its daemons fail to call back.
LOCAL_PROCESS_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_oob_tcp_if_include": "lo",
    "OMPI_MCA_btl_tcp_if_include": "lo",
    "OMPI_MCA_btl": "self,tcp",
    "OMPI_MCA_plm_rsh_no_tree_spawn": "1",
    "OMPI_MCA_orte_keep_fqdn_hostnames": "1",
    # orted stays in the foreground of the exec that started it (no --daemonize), so the exec sees
    # it die or hang and mpirun is told (node/orted.py); daemonized, mpirun waited forever
    "OMPI_MCA_orte_leave_session_attached": "1",
}
# (sic: upstream's MPI controller spells its reason this way)
TEMPLATE_RESTART_POLICY_REASON = "SettedPodTemplateRestartPolicy"


def config_map_name(job: TrainingJob) -> str:
    return f"{job.name}-config"


def launcher_name(job: TrainingJob) -> str:
    return f"{job.name}-launcher"


def slots(job: MPIJob) -> int:
    return job.spec.slots_per_worker if job.spec.slots_per_worker is not None else 1


def is_gpu_launcher(job: TrainingJob) -> bool:
    """A launcher container with a limit named ``*.com/gpu`` or containing ``gpu``."""
    spec = job.replica_specs.get(LAUNCHER)
    pod = spec.template.spec if spec is not None and spec.template is not None else None
    for container in pod.containers if pod is not None else []:
        limits = (container.resources.limits if container.resources is not None else None) or {}
        if any(name.endswith(".com/gpu") or "gpu" in name for name in limits):
            return True
    return False


class MPIPlugin(FrameworkPlugin):
    info = kinds.MPI
    local_process_env = LOCAL_PROCESS_ENV
    template_restart_policy_reason = TEMPLATE_RESTART_POLICY_REASON

    def pod_name(self, job: TrainingJob, rtype: str, index: int) -> str:
        return launcher_name(job) if rtype == LAUNCHER else super().pod_name(job, rtype, index)

    def is_master_role(self, job: TrainingJob, rtype: str, index: int) -> bool:
        return rtype == LAUNCHER

    @property
    def has_services(self) -> bool:
        return False

    @property
    def deleting_running_pod_fails(self) -> bool:
        return False  # MPI's own counter ignores the deletion timestamp

    # --- pods (newLauncher / newWorker, ReconcilePods) -------------------------------------
    def dress_pod(
        self,
        job: TrainingJob,
        rtype: str,
        index: int,
        pod_labels: dict[str, str],
        pod_spec: dict[str, Any],
        addressing: Addressing = CLUSTER,
    ) -> list[Event]:
        containers = pod_spec.get("containers") or []
        if not containers:
            raise ValueError(f"MPIJob {job.name}: spec.mpiReplicaSpecs[{rtype}] has no containers")
        if rtype == LAUNCHER:
            return self._dress_launcher(job, pod_labels, pod_spec, containers[0])
        pod_labels.update(labels.replica_labels(self.info.operator_name, job.name, rtype, index))
        main = containers[0]
        if not main.get("command"):
            # Workers only host mpirun's remote processes; this also replaces any args.
            main["command"] = ["sleep"]
            main["args"] = ["365d"]
        main["volumeMounts"] = [
            *(main.get("volumeMounts") or []),
            {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT_PATH},
        ]
        item = {"key": KUBEXEC, "path": KUBEXEC, "mode": 0o555}
        pod_spec["volumes"] = [
            *(pod_spec.get("volumes") or []),
            {"name": CONFIG_VOLUME, "configMap": {"name": config_map_name(job), "items": [item]}},
        ]
        return []

    def _dress_launcher(
        self, job: TrainingJob, pod_labels: dict[str, str], pod_spec: dict[str, Any], main: dict[str, Any]
    ) -> list[Event]:
        pod_labels.update(labels.replica_labels(self.info.operator_name, job.name, LAUNCHER, None))
        pod_labels[labels.JOB_ROLE] = "master"
        if not pod_spec.get("serviceAccountName"):
            pod_spec["serviceAccountName"] = launcher_name(job)
        pod_spec["initContainers"] = [*(pod_spec.get("initContainers") or []), kubectl_delivery(job)]
        extra = self.injected_env(job, LAUNCHER, 0, main["name"])
        main["env"] = [*(main.get("env") or []), *(e.to_dict() for e in extra)]
        main["volumeMounts"] = [
            *(main.get("volumeMounts") or []),
            {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_MOUNT_PATH},
            {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT_PATH},
        ]
        items = [
            {"key": KUBEXEC, "path": KUBEXEC, "mode": 0o555},
            {"key": HOSTFILE, "path": HOSTFILE, "mode": 0o444},
            {"key": DISCOVER_HOSTS, "path": DISCOVER_HOSTS, "mode": 0o555},
        ]
        pod_spec["volumes"] = [
            *(pod_spec.get("volumes") or []),
            {"name": KUBECTL_VOLUME, "emptyDir": {}},
            {"name": CONFIG_VOLUME, "configMap": {"name": config_map_name(job), "items": items}},
        ]
        return self.template_warnings(pod_spec)

    def plan_pods(
        self,
        job: TrainingJob,
        pods: list[PodState],
        services: Mapping[str, dict[str, Any]],
        addressing: Addressing = CLUSTER,
    ) -> list[PodAction]:
        """The ConfigMap, the workers, then the launcher once; nothing after the launcher finished."""
        launcher = of_type(pods, LAUNCHER)
        if launcher and launcher[0].phase in (SUCCEEDED, FAILED):
            return []
        workers = of_type(pods, WORKER)
        running = sorted(s.index for s in workers if s.phase == RUNNING and s.index is not None)
        wanted = replicas(job, WORKER)
        out: list[PodAction] = [
            EnsureObject(self.launcher_service_account(job)),
            ApplyConfigMap(self.config_map(job, running, addressing)),
            EnsureObject(self.launcher_role(job, wanted), update=("rules",)),
            EnsureObject(self.launcher_role_binding(job)),
        ]
        have = {s.index for s in workers}
        out += [DeletePod(s.name) for s in workers if s.index is not None and s.index >= wanted]
        out += [CreatePod(WORKER, index) for index in range(wanted) if index not in have]
        if not launcher:
            out.append(CreatePod(LAUNCHER, 0))
        return out

    def injected_env(
        self,
        job: TrainingJob,
        rtype: str,
        index: int,
        container_name: str,
        addressing: Addressing = CLUSTER,
    ) -> list[EnvVar]:
        spec = job.replica_specs.get(LAUNCHER)
        pod = spec.template.spec if spec is not None and spec.template is not None else None
        if rtype != LAUNCHER or pod is None or not pod.containers or pod.containers[0].name != container_name:
            return []
        out = [
            env(RSH_AGENT_ENV, f"{CONFIG_MOUNT_PATH}/{KUBEXEC}"),
            env("OMPI_MCA_orte_default_hostfile", f"{CONFIG_MOUNT_PATH}/{HOSTFILE}"),
        ]
        if not is_gpu_launcher(job):
            out += [env("NVIDIA_VISIBLE_DEVICES", ""), env("NVIDIA_DRIVER_CAPABILITIES", "")]
        user = {e.name for e in pod.containers[0].env or []} | {e.name for e in out}
        if "I_MPI_HYDRA_BOOTSTRAP" not in user:
            out.append(env("I_MPI_HYDRA_BOOTSTRAP", "rsh"))
        if "I_MPI_HYDRA_BOOTSTRAP_EXEC" not in user:
            out.append(env("I_MPI_HYDRA_BOOTSTRAP_EXEC", f"{CONFIG_MOUNT_PATH}/{KUBEXEC}"))
        return out

    # --- what the launcher's kubexec.sh needs: its ServiceAccount, Role and RoleBinding ---------
    def _launcher_meta(self, job: TrainingJob, name: str) -> ObjectMetaBody:
        return {
            "name": name,
            "namespace": job.namespace,
            "labels": {"app": job.name},
            "ownerReferences": [controller_ref(job, job.KIND)],
        }

    def launcher_account(self, job: TrainingJob) -> str:
        """The launcher's service account: its template's ``serviceAccountName``, else ``{job}-launcher``."""
        spec = job.replica_specs.get(LAUNCHER)
        pod = spec.template.spec if spec is not None and spec.template is not None else None
        return (pod.service_account_name if pod is not None else None) or launcher_name(job)

    def launcher_service_account(self, job: TrainingJob) -> ServiceAccountBody:
        return {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": self._launcher_meta(job, self.launcher_account(job)),
        }

    def launcher_role(self, job: TrainingJob, workers: int) -> RoleBody:
        """``{job}-launcher``: read pods, and exec into this job's workers only (``newLauncherRole``)."""
        names = [self.pod_name(job, WORKER, i) for i in range(workers)]
        exec_rule: dict[str, list[str]] = {"verbs": ["create"], "apiGroups": [""], "resources": ["pods/exec"]}
        if names:
            exec_rule["resourceNames"] = names
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": self._launcher_meta(job, launcher_name(job)),
            "rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}, exec_rule],
        }

    def launcher_role_binding(self, job: TrainingJob) -> RoleBindingBody:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": self._launcher_meta(job, launcher_name(job)),
            "subjects": [{"kind": "ServiceAccount", "name": self.launcher_account(job), "namespace": job.namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": launcher_name(job)},
        }

    # --- the {job}-config ConfigMap --------------------------------------------------------
    def hostfile(self, job: TrainingJob, addressing: Addressing = CLUSTER) -> str:
        assert isinstance(job, MPIJob)
        n = slots(job)
        lines = []
        if is_gpu_launcher(job):
            lines.append(f"{addressing.host(self.replica_ref(job, LAUNCHER, 0))} slots={n}\n")
        for i in range(replicas(job, WORKER)):
            lines.append(f"{addressing.host(self.replica_ref(job, WORKER, i))} slots={n}\n")
        return "".join(lines)

    def kubexec_script(self, job: TrainingJob) -> str:
        assert isinstance(job, MPIJob)
        script = f"#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n{KUBECTL_MOUNT_PATH}/kubectl exec ${{POD_NAME}}"
        if job.spec.main_container:
            script += f" --container {job.spec.main_container}"
        return script + ' -- /bin/sh -c "$*"'

    def discover_hosts(self, job: TrainingJob, running_workers: list[int], addressing: Addressing = CLUSTER) -> str:
        """``discover_hosts.sh`` for the worker indexes whose pods are Running (sorted by pod name)."""
        assert isinstance(job, MPIJob)
        n = slots(job)
        text = "#!/bin/sh"
        if is_gpu_launcher(job):
            text += f"\necho {addressing.host(self.replica_ref(job, LAUNCHER, 0))}:{n}\n"
        refs = sorted((self.replica_ref(job, WORKER, i) for i in running_workers), key=lambda r: r.pod_name)
        for ref in refs:
            text += f"\necho {addressing.host(ref)}:{n}"
        return text

    def config_map(
        self, job: TrainingJob, running_workers: list[int], addressing: Addressing = CLUSTER
    ) -> ConfigMapBody:
        """The ``{job}-config`` ConfigMap (hostfile, kubexec.sh, discover_hosts.sh)."""
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": config_map_name(job),
                "namespace": job.namespace,
                "labels": {"app": job.name},
                "ownerReferences": [controller_ref(job, job.KIND)],
            },
            "data": self.config_data(job, running_workers, addressing),
        }

    def config_data(
        self, job: TrainingJob, running_workers: list[int], addressing: Addressing = CLUSTER
    ) -> dict[str, str]:
        return {
            HOSTFILE: self.hostfile(job, addressing),
            KUBEXEC: self.kubexec_script(job),
            DISCOVER_HOSTS: self.discover_hosts(job, running_workers, addressing),
        }

    # --- status ----------------------------------------------------------------------------
    def update_status(self, job: TrainingJob, status: JobStatus, pods: list[PodState], now: datetime) -> StatusUpdate:
        rec = Recorder(self.info.kind, status, now)
        ensure_start_time(status, now)
        for rtype in self.replica_types(job):
            t = tally(job, status, rtype)
            if rtype == LAUNCHER:
                if t.active > 0:
                    rec.running(f"MPIJob {job.name} is running.")
                if t.expected == 0:
                    rec.succeeded(f"MPIJob {job.name} is successfully completed.")
                    return rec.result()
            if t.failed > 0:
                if t.spec.restart_policy == "ExitCode":
                    rec.restarting(f"MPIJob {job.name} is restarting because {t.failed} {rtype} replica(s) failed.")
                else:
                    # Upstream applies the kind prefix twice: reason "MPIJobMPIJobFailed".
                    rec.failed(
                        f"MPIJob {job.name} is failed because {t.failed} {rtype} replica(s) failed.",
                        reason_verb="MPIJobFailed",
                    )
        return rec.result()


def kubectl_delivery(job: TrainingJob) -> dict[str, Any]:
    """The launcher's init container that delivers kubectl for ``kubexec.sh``."""
    resources = {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}
    return {
        "name": KUBECTL_DELIVERY_NAME,
        "image": KUBECTL_DELIVERY_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "env": [{"name": "TARGET_DIR", "value": KUBECTL_MOUNT_PATH}, {"name": "NAMESPACE", "value": job.namespace}],
        "volumeMounts": [
            {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_MOUNT_PATH},
            {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT_PATH},
        ],
        "resources": {"limits": dict(resources), "requests": dict(resources)},
    }
