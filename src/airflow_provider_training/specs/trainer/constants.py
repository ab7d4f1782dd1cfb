"""Names Kubeflow Trainer v2.3.0 and JobSet v0.12.0 rely on (``trainer-v2.md`` §1, §7): pure data."""

from __future__ import annotations

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
JOBSET_API_VERSION = f"{JOBSET_GROUP}/{JOBSET_VERSION}"

TRAINJOB = "TrainJob"
TRAINING_RUNTIME = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
JOBSET = "JobSet"
RUNTIME_KINDS = (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)

# Registry keys of the runtimes the controller knows (``schema.GroupKind.String()``).
REGISTERED_RUNTIMES = (f"{TRAINING_RUNTIME}.{GROUP}", f"{CLUSTER_TRAINING_RUNTIME}.{GROUP}")

MANAGED_BY_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
MANAGED_BY_VALUES = (MANAGED_BY_CONTROLLER, "kueue.x-k8s.io/multikueue")
SDK_MANAGER = "trainer.kubeflow.org/kubeflow-sdk"

# Labels.
LABEL_ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
LABEL_FRAMEWORK = "trainer.kubeflow.org/framework"
LABEL_SUPPORT = "trainer.kubeflow.org/support"
SUPPORT_DEPRECATED = "deprecated"
LABEL_WEBHOOK_VALIDATION = "trainer.kubeflow.org/webhook-validation"

# Ancestor-step values and the container each one needs.
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
ANCESTOR_TRAINER = "trainer"
ANCESTOR_CONTAINERS = {
    DATASET_INITIALIZER: DATASET_INITIALIZER,
    MODEL_INITIALIZER: MODEL_INITIALIZER,
    ANCESTOR_TRAINER: "node",
}
NODE = "node"
LAUNCHER = "launcher"
INITIALIZER_VOLUME = "initializer"
STORAGE_URI_ENV = "STORAGE_URI"

CONTAINER_TRAINER_PORT = 29500
JOB_COMPLETION_INDEX_FIELD_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"

# Torch (``pkg/constants``).
TORCH_ENV_NUM_NODES = "PET_NNODES"
TORCH_ENV_NUM_PROC_PER_NODE = "PET_NPROC_PER_NODE"
TORCH_ENV_NODE_RANK = "PET_NODE_RANK"
TORCH_ENV_MASTER_ADDR = "PET_MASTER_ADDR"
TORCH_ENV_MASTER_PORT = "PET_MASTER_PORT"
TORCH_RESERVED_ENV = (
    TORCH_ENV_NUM_NODES,
    TORCH_ENV_NUM_PROC_PER_NODE,
    TORCH_ENV_NODE_RANK,
    TORCH_ENV_MASTER_ADDR,
    TORCH_ENV_MASTER_PORT,
)
TORCHTUNE_ENTRYPOINT = ["tune", "run"]

# MPI.
MPI_SSH_AUTH_SECRET_SUFFIX = "-mpi-ssh-auth"
MPI_SSH_AUTH_VOLUME = "mpi-ssh-auth"
MPI_HOSTFILE_CONFIGMAP_SUFFIX = "-mpi-hostfile"
MPI_HOSTFILE_VOLUME = "mpi-hostfile"
MPI_HOSTFILE_DIR = "/etc/mpi"
MPI_HOSTFILE_NAME = "hostfile"
OPENMPI = "OpenMPI"
OPENMPI_ENV_HOSTFILE = "OMPI_MCA_orte_default_hostfile"
OPENMPI_ENV_KEEP_FQDN = "OMPI_MCA_orte_keep_fqdn_hostnames"
OPENMPI_ENV_DEFAULT_SLOTS = "OMPI_MCA_orte_set_default_slots"
OPENMPI_ENV_RSH_ARGS = "OMPI_MCA_plm_rsh_args"
OPENMPI_RSH_ARGS = "-o ConnectionAttempts=10"
MPI_RESERVED_ENV = (OPENMPI_ENV_HOSTFILE, OPENMPI_ENV_KEEP_FQDN, OPENMPI_ENV_DEFAULT_SLOTS, OPENMPI_ENV_RSH_ARGS)

# JAX / XGBoost.
JAX_ENV_NUM_PROCESSES = "JAX_NUM_PROCESSES"
JAX_ENV_PROCESS_ID = "JAX_PROCESS_ID"
JAX_ENV_COORDINATOR_ADDRESS = "JAX_COORDINATOR_ADDRESS"
XGBOOST_ENV_TRACKER_URI = "DMLC_TRACKER_URI"
XGBOOST_ENV_TRACKER_PORT = "DMLC_TRACKER_PORT"
XGBOOST_ENV_TASK_ID = "DMLC_TASK_ID"
XGBOOST_ENV_NUM_WORKER = "DMLC_NUM_WORKER"
XGBOOST_RESERVED_ENV = (XGBOOST_ENV_TRACKER_URI, XGBOOST_ENV_TRACKER_PORT, XGBOOST_ENV_TASK_ID, XGBOOST_ENV_NUM_WORKER)

RUNTIME_DEPRECATION_POLICY_URL = (
    "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
)

# TrainJobStatus (``pkg/runtime/framework/plugins/trainjobstatus``, ``pkg/statusserver``).
STATUS_ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
STATUS_ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
STATUS_ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
STATUS_MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
STATUS_CA_CERT_FILE = "ca.crt"
STATUS_TOKEN_FILE = "token"
STATUS_TOKEN_VOLUME = "kubeflow-trainer-token"
STATUS_TOKEN_EXPIRY_SECONDS = 3600
STATUS_TLS_CONFIGMAP_SUFFIX = "-tls-config"
STATUS_FIELD_OWNER = "trainer-status"
STATUS_MAX_BODY_BYTES = 1 << 16
RUNTIME_SNAPSHOT_SUFFIX = "-runtime-snapshot"
RUNTIME_SNAPSHOT_KEY = "runtime"
