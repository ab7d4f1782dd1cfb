"""Injected environment, table-driven from training-operator.md §4."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from airflow_provider_training.frameworks import ClusterAddressing, ReplicaRef, plugin
from airflow_provider_training.frameworks.base import InjectionError
from airflow_provider_training.specs.pod import EnvVar, ResourceRequirements
from tests.factories import typed_job as make_job


def pairs(env: list[EnvVar]) -> list[tuple[str, str | None]]:
    return [(e.name, e.value) for e in env]


PT_MASTER0 = [
    ("PYTHONUNBUFFERED", "1"),
    ("MASTER_PORT", "23456"),
    ("PET_MASTER_PORT", "23456"),
    ("MASTER_ADDR", "pj-master-0"),
    ("PET_MASTER_ADDR", "pj-master-0"),
    ("WORLD_SIZE", "3"),
    ("RANK", "0"),
    ("PET_NODE_RANK", "0"),
    ("PET_NPROC_PER_NODE", "auto"),
    ("PET_NNODES", "3"),
]


def test_pytorch_worked_example_master_and_worker() -> None:
    job = make_job("PyTorchJob", "pj", {"Master": 1, "Worker": 2})
    p = plugin("PyTorchJob")
    assert pairs(p.injected_env(job, "Master", 0, "pytorch")) == PT_MASTER0
    worker1 = [(k, {"RANK": "2", "PET_NODE_RANK": "2"}.get(k, v)) for k, v in PT_MASTER0]
    assert pairs(p.injected_env(job, "Worker", 1, "pytorch")) == worker1


@pytest.mark.parametrize(
    ("nproc", "world_size", "pet_nproc"),
    [("4", "12", "4"), ("auto", "3", "auto"), ("gpu", "3", "gpu"), ("+2", "6", "+2")],
)
def test_pytorch_world_size_multiplies_integer_nproc_per_node(nproc: str, world_size: str, pet_nproc: str) -> None:
    job = make_job("PyTorchJob", "pj", {"Master": 1, "Worker": 2}, nprocPerNode=nproc)
    env = dict(pairs(plugin("PyTorchJob").injected_env(job, "Worker", 0, "pytorch")))
    assert (env["WORLD_SIZE"], env["PET_NPROC_PER_NODE"], env["PET_NNODES"]) == (world_size, pet_nproc, "3")


def test_pytorch_without_master_sets_no_rank_or_master_addr() -> None:
    job = make_job("PyTorchJob", "pj", {"Worker": 2})
    assert pairs(plugin("PyTorchJob").injected_env(job, "Worker", 1, "pytorch")) == [
        ("PYTHONUNBUFFERED", "1"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_NNODES", "2"),
    ]


def test_pytorch_elastic_block_in_upstream_order() -> None:
    elastic = {
        "maxReplicas": 4,
        "maxRestarts": 3,
        "rdzvId": "abc",
        "rdzvConf": [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}],
        "standalone": True,
    }
    job = make_job("PyTorchJob", "el", {"Worker": 2}, elasticPolicy=elastic)
    assert pairs(plugin("PyTorchJob").injected_env(job, "Worker", 1, "pytorch")) == [
        ("PYTHONUNBUFFERED", "1"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_RDZV_ENDPOINT", "el-worker-0:23456"),
        ("PET_RDZV_BACKEND", "c10d"),
        ("PET_NNODES", "4:4"),
        ("PET_MAX_RESTARTS", "3"),
        ("PET_RDZV_ID", "abc"),
        ("PET_RDZV_CONF", "a=1,b=2"),
        ("PET_STANDALONE", ""),
    ]


def test_pytorch_elastic_defaults_nnodes_to_worker_count_and_explicit_host_port() -> None:
    job = make_job(
        "PyTorchJob", "el", {"Worker": 3}, elasticPolicy={"rdzvHost": "etcd", "rdzvPort": 2379, "rdzvBackend": "etcd"}
    )
    env = dict(pairs(plugin("PyTorchJob").injected_env(job, "Worker", 0, "pytorch")))
    assert env["PET_RDZV_ENDPOINT"] == "etcd:2379"
    assert env["PET_RDZV_BACKEND"] == "etcd"
    assert env["PET_NNODES"] == "3:3"


def test_missing_master_port_fails_like_pod_creation() -> None:
    job = make_job("PyTorchJob", "pj", {"Master": 1})
    job.replica_specs["Master"].template.spec.containers[0].ports = []  # type: ignore[union-attr]
    with pytest.raises(InjectionError, match="pytorchjob-port"):
        plugin("PyTorchJob").injected_env(job, "Master", 0, "pytorch")


# The exact string asserted upstream in pkg/controller.v1/tensorflow/pod_test.go.
TF_UPSTREAM = (
    '{"cluster":{"ps":["x-ps-0.ns2.svc.tf.training.org:2222"],'
    '"worker":["x-worker-0.ns2.svc.tf.training.org:2222"]},'
    '"task":{"type":"worker","index":0},"environment":"cloud"}'
)


def test_tf_config_byte_exact_with_custom_cluster_domain() -> None:
    job = make_job("TFJob", "x", {"PS": 1, "Worker": 1}, namespace="ns2")
    env = plugin("TFJob").injected_env(job, "Worker", 0, "tensorflow", ClusterAddressing("tf.training.org"))
    assert pairs(env) == [("TF_CONFIG", TF_UPSTREAM)]


def test_tf_config_only_on_tensorflow_container_and_only_when_distributed() -> None:
    p = plugin("TFJob")
    job = make_job("TFJob", "x", {"Chief": 1, "Worker": 2, "Evaluator": 1})
    assert p.injected_env(job, "Worker", 0, "sidecar") == []
    config = p.injected_env(job, "Evaluator", 0, "tensorflow")[0].value
    assert config == (
        '{"cluster":{"chief":["x-chief-0.default.svc:2222"],"evaluator":["x-evaluator-0.default.svc:2222"],'
        '"worker":["x-worker-0.default.svc:2222","x-worker-1.default.svc:2222"]},'
        '"task":{"type":"evaluator","index":0},"environment":"cloud"}'
    )
    assert p.injected_env(make_job("TFJob", "solo", {"Worker": 1}), "Worker", 0, "tensorflow") == []


@pytest.mark.parametrize(
    ("rtype", "index", "expected"),
    [
        (
            "Worker",
            1,
            '{"cluster":{"worker":{"1":"d-worker-1.default.svc:2222"},"ps":["d-ps-0.default.svc:2222"]},"task":{"type":"worker","index":1}}',
        ),
        ("PS", 0, '{"cluster":{"worker":{},"ps":["d-ps-0.default.svc:2222"]},"task":{"type":"ps","index":0}}'),
        ("Chief", 0, '{"cluster":{"worker":{},"ps":[]},"task":{"type":"chief","index":0}}'),
    ],
)
def test_tf_dynamic_worker_sparse_form(rtype: str, index: int, expected: str) -> None:
    job = make_job("TFJob", "d", {"Chief": 1, "PS": 1, "Worker": 2}, enableDynamicWorker=True)
    assert plugin("TFJob").injected_env(job, rtype, index, "tensorflow")[0].value == expected


def test_tf_dynamic_worker_without_ps_serialises_null() -> None:
    job = make_job("TFJob", "d", {"Worker": 2}, enableDynamicWorker=True)
    value = plugin("TFJob").injected_env(job, "Worker", 0, "tensorflow")[0].value
    assert (
        value
        == '{"cluster":{"worker":{"0":"d-worker-0.default.svc:2222"},"ps":null},"task":{"type":"worker","index":0}}'
    )


def test_mpi_env_only_on_launcher_first_container() -> None:
    job = make_job("MPIJob", "m", {"Launcher": 1, "Worker": 2})
    p = plugin("MPIJob")
    assert pairs(p.injected_env(job, "Launcher", 0, "launcher")) == [
        ("OMPI_MCA_plm_rsh_agent", "/etc/mpi/kubexec.sh"),
        ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
        ("NVIDIA_VISIBLE_DEVICES", ""),
        ("NVIDIA_DRIVER_CAPABILITIES", ""),
        ("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
        ("I_MPI_HYDRA_BOOTSTRAP_EXEC", "/etc/mpi/kubexec.sh"),
    ]
    assert p.injected_env(job, "Worker", 0, "launcher") == []
    assert p.injected_env(job, "Launcher", 0, "other") == []


def test_mpi_gpu_launcher_and_user_bootstrap() -> None:
    job = make_job("MPIJob", "m", {"Launcher": 1, "Worker": 1})
    c = job.replica_specs["Launcher"].template.spec.containers[0]  # type: ignore[union-attr]
    c.env = [EnvVar(name="I_MPI_HYDRA_BOOTSTRAP", value="ssh")]
    c.resources = ResourceRequirements(limits={"nvidia.com/gpu": 1})
    names = [e.name for e in plugin("MPIJob").injected_env(job, "Launcher", 0, "launcher")]
    assert names == ["OMPI_MCA_plm_rsh_agent", "OMPI_MCA_orte_default_hostfile", "I_MPI_HYDRA_BOOTSTRAP_EXEC"]


def test_xgboost_env() -> None:
    job = make_job("XGBoostJob", "xg", {"Master": 1, "Worker": 2})
    assert pairs(plugin("XGBoostJob").injected_env(job, "Worker", 1, "xgboost")) == [
        ("MASTER_PORT", "9999"),
        ("MASTER_ADDR", "xg-master-0"),
        ("WORLD_SIZE", "3"),
        ("RANK", "2"),
        ("PYTHONUNBUFFERED", "1"),
        ("WORKER_PORT", "9999"),
        ("WORKER_ADDRS", "xg-worker-0,xg-worker-1"),
    ]
    solo = make_job("XGBoostJob", "xg", {"Master": 1})
    assert [e.name for e in plugin("XGBoostJob").injected_env(solo, "Master", 0, "xgboost")] == [
        "MASTER_PORT",
        "MASTER_ADDR",
        "WORLD_SIZE",
        "RANK",
        "PYTHONUNBUFFERED",
    ]


@pytest.mark.parametrize(
    ("replicas", "rtype", "index", "tail"),
    [
        ({"Worker": 3}, "Worker", 0, [("POD_IP_DUMMY", None), ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543")]),
        ({"Worker": 3}, "Worker", 2, [("PADDLE_MASTER", "pd-worker-0:36543")]),
        (
            {"Master": 1, "Worker": 2},
            "Master",
            0,
            [("POD_IP_DUMMY", None), ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543"), ("PADDLE_SERVER_NUM", "1")],
        ),
        (
            {"Master": 1, "Worker": 2},
            "Worker",
            0,
            [("PADDLE_MASTER", "pd-master-0:36543"), ("PADDLE_TRAINER_NUM", "1")],
        ),
    ],
)
def test_paddle_env(replicas: dict[str, int], rtype: str, index: int, tail: list[tuple[str, str | None]]) -> None:
    job = make_job("PaddleJob", "pd", replicas)
    env = plugin("PaddleJob").injected_env(job, rtype, index, "paddle")
    total = str(sum(replicas.values()))
    assert pairs(env) == [("PYTHONUNBUFFERED", "1"), ("PADDLE_JOB_ID", "pd"), ("PADDLE_NNODES", total), *tail]
    if tail[0][0] == "POD_IP_DUMMY":
        assert env[3].value_from == {"fieldRef": {"fieldPath": "status.podIP"}}


def test_mxnet_env_and_mx_config() -> None:
    job = make_job("MXJob", "mx", {"Scheduler": 1, "Server": 1, "Worker": 2})
    env = pairs(plugin("MXJob").injected_env(job, "Worker", 1, "mxnet"))
    assert env[0] == (
        "MX_CONFIG",
        '{"cluster":{"scheduler":[{"url":"mx-scheduler-0","port":9091}],"server":[{"url":"mx-server-0","port":9091}],'
        '"worker":[{"url":"mx-worker-0","port":9091},{"url":"mx-worker-1","port":9091}]},'
        '"labels":{"scheduler":"","server":"","worker":""},"task":{"type":"worker","index":1}}',
    )
    assert env[1:] == [
        ("DMLC_PS_ROOT_PORT", "9091"),
        ("DMLC_PS_ROOT_URI", "mx-scheduler-0"),
        ("DMLC_NUM_SERVER", "1"),
        ("DMLC_NUM_WORKER", "2"),
        ("DMLC_ROLE", "worker"),
        ("DMLC_USE_KUBERNETES", "1"),
        ("DMLC_WORKER_ID", "1"),
    ]


def test_jax_env() -> None:
    job = make_job("JAXJob", "jx", {"Worker": 3})
    assert pairs(plugin("JAXJob").injected_env(job, "Worker", 2, "jax")) == [
        ("PYTHONUNBUFFERED", "1"),
        ("COORDINATOR_PORT", "6666"),
        ("COORDINATOR_ADDRESS", "jx-worker-0"),
        ("NUM_PROCESSES", "3"),
        ("PROCESS_ID", "2"),
    ]


@dataclass(frozen=True)
class Loopback:
    """What the embedded control plane will do: one 127.0.0.x per replica, ports shifted."""

    def host(self, replica: ReplicaRef) -> str:
        return f"127.0.{len(replica.replica_type)}.{replica.index + 1}"

    def service_host(self, replica: ReplicaRef) -> str:
        return self.host(replica)

    def port(self, replica: ReplicaRef, port_name: str, declared: int) -> int:
        return 40000 + replica.index


@pytest.mark.parametrize(
    ("kind", "replicas", "rtype", "container"),
    [
        ("PyTorchJob", {"Master": 1, "Worker": 2}, "Worker", "pytorch"),
        ("PyTorchJob", {"Worker": 2}, "Worker", "pytorch"),
        ("TFJob", {"PS": 1, "Worker": 2}, "Worker", "tensorflow"),
        ("XGBoostJob", {"Master": 1, "Worker": 2}, "Worker", "xgboost"),
        ("PaddleJob", {"Worker": 2}, "Worker", "paddle"),
        ("MXJob", {"Scheduler": 1, "Worker": 2}, "Worker", "mxnet"),
        ("JAXJob", {"Worker": 2}, "Worker", "jax"),
    ],
)
def test_every_address_and_port_goes_through_addressing(
    kind: str, replicas: dict[str, int], rtype: str, container: str
) -> None:
    spec = {"elasticPolicy": {}} if replicas == {"Worker": 2} and kind == "PyTorchJob" else {}
    job = make_job(kind, "aj", replicas, **spec)
    values = " ".join(e.value or "" for e in plugin(kind).injected_env(job, rtype, 1, container, Loopback()))
    assert "aj-" not in values, values  # no cluster DNS name left
    assert "127.0." in values and "4000" in values
    for default_port in ("23456", "2222", "9999", "36543", "9091", "6666"):
        assert default_port not in values
    if kind == "TFJob":
        assert json.loads(values)["cluster"]["worker"] == ["127.0.6.1:40000", "127.0.6.2:40001"]
