"""Identity of each Training Operator kind (``training-operator.md`` §1): pure data, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass

GROUP = "kubeflow.org"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES = ("None", "Running", "All")
MANAGED_BY_VALUES = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")


@dataclass(frozen=True)
class KindInfo:
    """What a kind is called and which replica types, container and port it uses by default."""

    kind: str
    plural: str
    singular: str
    replica_specs_field: str
    replica_types: tuple[str, ...]
    default_container: str
    default_port_name: str
    default_port: int
    default_restart_policy: str
    operator_name: str
    scale_subresource: bool
    # Types the defaulter renames case-insensitively (``worker`` -> ``Worker``), §6.1.
    canonicalized_types: tuple[str, ...]
    # Whether the defaulter appends the default port to the default container (not for MPI).
    adds_default_port: bool = True
    # Target release of the semantics this project follows.
    operator_version: str = "v1.9.4"

    @property
    def api_version(self) -> str:
        return API_VERSION

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def canonical_type(self, key: str) -> str:
        """The defaulter's spelling of a replica-type key (unknown keys stay as they are)."""
        for rtype in self.canonicalized_types:
            if rtype.lower() == key.lower():
                return rtype
        return key


PYTORCH = KindInfo(
    kind="PyTorchJob",
    plural="pytorchjobs",
    singular="pytorchjob",
    replica_specs_field="pytorchReplicaSpecs",
    replica_types=("Master", "Worker"),
    default_container="pytorch",
    default_port_name="pytorchjob-port",
    default_port=23456,
    default_restart_policy="OnFailure",
    operator_name="pytorchjob-controller",
    scale_subresource=True,
    canonicalized_types=("Master", "Worker"),
)
TENSORFLOW = KindInfo(
    kind="TFJob",
    plural="tfjobs",
    singular="tfjob",
    replica_specs_field="tfReplicaSpecs",
    replica_types=("Chief", "PS", "Worker", "Evaluator", "Master"),
    default_container="tensorflow",
    default_port_name="tfjob-port",
    default_port=2222,
    default_restart_policy="Never",
    operator_name="tfjob-controller",
    scale_subresource=False,
    canonicalized_types=("PS", "Worker", "Chief", "Master", "Evaluator"),
)
MPI = KindInfo(
    kind="MPIJob",
    plural="mpijobs",
    singular="mpijob",
    replica_specs_field="mpiReplicaSpecs",
    replica_types=("Launcher", "Worker"),
    default_container="mpi",
    default_port_name="mpi-port",
    default_port=9999,
    default_restart_policy="Never",
    operator_name="mpijob-controller",
    scale_subresource=False,
    canonicalized_types=(),
    adds_default_port=False,
)
XGBOOST = KindInfo(
    kind="XGBoostJob",
    plural="xgboostjobs",
    singular="xgboostjob",
    replica_specs_field="xgbReplicaSpecs",
    replica_types=("Master", "Worker"),
    default_container="xgboost",
    default_port_name="xgboostjob-port",
    default_port=9999,
    default_restart_policy="Never",
    operator_name="xgboostjob-controller",
    scale_subresource=False,
    canonicalized_types=("Master", "Worker"),
)
PADDLE = KindInfo(
    kind="PaddleJob",
    plural="paddlejobs",
    singular="paddlejob",
    replica_specs_field="paddleReplicaSpecs",
    replica_types=("Master", "Worker"),
    default_container="paddle",
    default_port_name="master",
    default_port=36543,
    default_restart_policy="OnFailure",
    operator_name="paddlejob-controller",
    scale_subresource=True,
    canonicalized_types=("Master", "Worker"),
)
MXNET = KindInfo(
    kind="MXJob",
    plural="mxjobs",
    singular="mxjob",
    replica_specs_field="mxReplicaSpecs",
    replica_types=("Scheduler", "Server", "Worker", "TunerTracker", "TunerServer", "Tuner"),
    default_container="mxnet",
    default_port_name="mxjob-port",
    default_port=9091,
    default_restart_policy="Never",
    operator_name="mxjob-controller",
    scale_subresource=False,
    canonicalized_types=("Scheduler", "Server", "Worker"),
    operator_version="v1.8.1",
)
JAX = KindInfo(
    kind="JAXJob",
    plural="jaxjobs",
    singular="jaxjob",
    replica_specs_field="jaxReplicaSpecs",
    replica_types=("Worker",),
    default_container="jax",
    default_port_name="jaxjob-port",
    default_port=6666,
    default_restart_policy="Never",
    operator_name="jaxjob-controller",
    scale_subresource=True,
    canonicalized_types=("Worker",),
)

ALL_KINDS: tuple[KindInfo, ...] = (PYTORCH, TENSORFLOW, MPI, XGBOOST, PADDLE, MXNET, JAX)
KINDS: dict[str, KindInfo] = {info.kind: info for info in ALL_KINDS}
KINDS_BY_PLURAL: dict[str, KindInfo] = {info.plural: info for info in ALL_KINDS}


def kind_info(kind: str) -> KindInfo:
    """Look a kind up by its exact name; the error lists the supported kinds."""
    try:
        return KINDS[kind]
    except KeyError:
        supported = ", ".join(KINDS)
        raise KeyError(f"unknown kind {kind!r}: supported kinds are {supported}") from None
