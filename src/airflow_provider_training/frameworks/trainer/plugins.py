"""The mlPolicy plugins' ``EnforceMLPolicy`` (``trainer-v2.md`` §3.5 to §3.7): node counts, the
environment and ports each framework injects. At most one framework plugin acts on a runtime;
PlainML acts whenever none of torch, MPI or JAX is set (so for XGBoost both act, PlainML first).
"""

from __future__ import annotations

from airflow_provider_training.frameworks.trainer import upsert
from airflow_provider_training.frameworks.trainer.info import BuildError, RuntimeInfo, cpus_per_node, gpus_per_node
from airflow_provider_training.specs.trainer import constants as c


def _trainer_env(info: RuntimeInfo) -> list[dict[str, object]]:
    trainer = info.trainjob.spec.trainer
    return [env.to_dict() for env in (trainer.env or [])] if trainer else []


def _override_trainer_count(info: RuntimeInfo) -> None:
    trainer = info.trainjob.spec.trainer
    podset = info.podset_by_ancestor(c.ANCESTOR_TRAINER)
    if podset is not None and trainer is not None and trainer.num_nodes is not None:
        podset.count = trainer.num_nodes


def _master(info: RuntimeInfo) -> str:
    # The replicatedJob name ``node`` and the TrainJob name are fixed here; a custom subdomain is ignored.
    return f"{info.name}-{c.NODE}-0-0.{info.name}"


def _trainer_port(container: dict[str, object]) -> None:
    upsert.ports(container, {"containerPort": c.CONTAINER_TRAINER_PORT})


def num_proc_per_node(info: RuntimeInfo) -> str:
    """Torch's ``PET_NPROC_PER_NODE``: the TrainJob's value, else from CPUs (no GPU) or ``auto``."""
    trainer = info.trainjob.spec.trainer
    if trainer is not None and trainer.num_proc_per_node is not None:
        return str(trainer.num_proc_per_node)
    resources = info.resources_per_node()
    if gpus_per_node(resources) == 0:
        return str(max(1, cpus_per_node(resources)))
    return "auto"


def torch(info: RuntimeInfo) -> None:
    policy = info.ml_policy.torch
    if policy is None:
        return
    _override_trainer_count(info)
    trainer = info.trainjob.spec.trainer
    if trainer is not None and trainer.command == c.TORCHTUNE_ENTRYPOINT:
        raise BuildError("torchtune TrainJobs (command [tune run]) are not supported by this provider")
    podset = info.podset_by_ancestor(c.ANCESTOR_TRAINER)
    nodes = podset.count if podset is not None else 1
    pet = [
        upsert.value(c.TORCH_ENV_NUM_NODES, str(nodes)),
        upsert.value(c.TORCH_ENV_NUM_PROC_PER_NODE, num_proc_per_node(info)),
        upsert.field_ref(c.TORCH_ENV_NODE_RANK, c.JOB_COMPLETION_INDEX_FIELD_PATH),
    ]
    master = [
        upsert.value(c.TORCH_ENV_MASTER_ADDR, _master(info)),
        upsert.value(c.TORCH_ENV_MASTER_PORT, str(c.CONTAINER_TRAINER_PORT)),
    ]
    container = info.trainer_container() if trainer is not None else None
    if container is not None:
        upsert.env(container, *_trainer_env(info))
        upsert.env(container, *pet)
        upsert.env(container, *master)
        _trainer_port(container)
    targets = policy.env_injection.targets if policy.env_injection else None
    for target in targets or []:
        for name in target.container_names:
            extra = info.container(info.podset(target.job_name), name)
            if extra is None:
                raise BuildError(
                    f'envInjection target podSet "{target.job_name}" container "{name}" not found in runtime template'
                )
            upsert.env(extra, *pet)
            upsert.env(extra, *master)


def mpi(info: RuntimeInfo) -> int | None:
    """Returns the slots per node (``numProcPerNode`` after the plugin's adjustments)."""
    policy = info.ml_policy.mpi
    if policy is None:
        return None
    trainer = info.trainjob.spec.trainer
    run_launcher_as_node = bool(policy.run_launcher_as_node)
    node = info.podset(c.NODE)
    if trainer is not None and trainer.num_nodes is not None and node is not None:
        node.count = max(trainer.num_nodes - 1, 1) if run_launcher_as_node else trainer.num_nodes
    slots = policy.num_proc_per_node if policy.num_proc_per_node is not None else 1
    if trainer is not None and trainer.num_proc_per_node is not None:
        slots = trainer.num_proc_per_node
    elif slots == 1 and (gpus := gpus_per_node(info.resources_per_node())) > 1:
        slots = gpus
    implementation = policy.mpi_implementation if policy.mpi_implementation is not None else c.OPENMPI
    mount_path = policy.ssh_auth_mount_path or "/root/.ssh"
    for podset in info.podsets:
        if podset.name not in (c.NODE, c.LAUNCHER):
            continue
        pod = info.pod_spec(podset)
        upsert.volumes(
            pod,
            {
                "name": c.MPI_SSH_AUTH_VOLUME,
                "secret": {
                    "secretName": f"{info.name}{c.MPI_SSH_AUTH_SECRET_SUFFIX}",
                    "defaultMode": 0o400,
                    "items": [
                        {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
                        {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
                        {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644},
                    ],
                },
            },
        )
        if podset.name == c.LAUNCHER:
            upsert.volumes(
                pod,
                {
                    "name": c.MPI_HOSTFILE_VOLUME,
                    "configMap": {
                        "name": f"{info.name}{c.MPI_HOSTFILE_CONFIGMAP_SUFFIX}",
                        "items": [{"key": c.MPI_HOSTFILE_NAME, "path": c.MPI_HOSTFILE_NAME, "mode": 0o444}],
                    },
                },
            )
        for container in pod.get("containers") or []:
            if container.get("name") != c.NODE:
                continue
            upsert.volume_mounts(container, {"name": c.MPI_SSH_AUTH_VOLUME, "mountPath": mount_path})
            if podset.name != c.LAUNCHER:
                continue
            upsert.volume_mounts(container, {"name": c.MPI_HOSTFILE_VOLUME, "mountPath": c.MPI_HOSTFILE_DIR})
            if implementation != c.OPENMPI:
                raise BuildError(f"MPI implementation for {implementation} doesn't supported")
            upsert.env(
                container,
                upsert.value(c.OPENMPI_ENV_HOSTFILE, f"{c.MPI_HOSTFILE_DIR}/{c.MPI_HOSTFILE_NAME}"),
                upsert.value(c.OPENMPI_ENV_KEEP_FQDN, "true"),
                upsert.value(c.OPENMPI_ENV_DEFAULT_SLOTS, str(slots)),
                upsert.value(c.OPENMPI_ENV_RSH_ARGS, c.OPENMPI_RSH_ARGS),
            )
    return slots


def plain(info: RuntimeInfo) -> None:
    policy = info.ml_policy
    if policy.torch is not None or policy.mpi is not None or policy.jax is not None:
        return
    _override_trainer_count(info)
    container = info.trainer_container() if info.trainjob.spec.trainer is not None else None
    if container is not None:
        upsert.env(container, *_trainer_env(info))


def jax(info: RuntimeInfo) -> None:
    if info.ml_policy.jax is None:
        return
    _override_trainer_count(info)
    container = info.trainer_container() if info.trainjob.spec.trainer is not None else None
    if container is None:
        return
    podset = info.podset_by_ancestor(c.ANCESTOR_TRAINER)
    nodes = podset.count if podset is not None else 1
    upsert.env(
        container,
        upsert.value(c.JAX_ENV_NUM_PROCESSES, str(nodes)),
        upsert.field_ref(c.JAX_ENV_PROCESS_ID, c.JOB_COMPLETION_INDEX_FIELD_PATH),
        upsert.value(c.JAX_ENV_COORDINATOR_ADDRESS, f"{_master(info)}:{c.CONTAINER_TRAINER_PORT}"),
    )
    _trainer_port(container)


def xgboost(info: RuntimeInfo) -> None:
    if info.ml_policy.xgboost is None:
        return
    podset = info.podset_by_ancestor(c.ANCESTOR_TRAINER)
    if podset is None:
        return
    _override_trainer_count(info)
    container = info.trainer_container() if info.trainjob.spec.trainer is not None else None
    if container is None:
        return
    workers_per_node = gpus_per_node(info.resources_per_node()) or 1
    upsert.env(
        container,
        upsert.value(c.XGBOOST_ENV_TRACKER_URI, _master(info)),
        upsert.value(c.XGBOOST_ENV_TRACKER_PORT, str(c.CONTAINER_TRAINER_PORT)),
        upsert.field_ref(c.XGBOOST_ENV_TASK_ID, c.JOB_COMPLETION_INDEX_FIELD_PATH),
        upsert.value(c.XGBOOST_ENV_NUM_WORKER, str(podset.count * workers_per_node)),
    )
    _trainer_port(container)
