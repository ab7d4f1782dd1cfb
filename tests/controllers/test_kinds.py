"""Every other kind end to end with small scripts: the environment the operator injects (with the
embedded addresses) as the replica process sees it, and the kind's status rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.controllers.jobs import Jobs, conditions
from tests.factories import job_document as job
from tests.factories import replica
from tests.waiting import wait_for

DUMP = "import json, os; print(json.dumps({{k: os.environ.get(k) for k in {keys!r}}}))"


@pytest.fixture
def jobs(kube_api: Any, test_namespace: str) -> Jobs:
    return Jobs(kube_api, test_namespace)


def _env_seen(jobs: Jobs, name: str) -> dict[str, dict[str, Any]]:
    pods = jobs.pods(name)
    wait_for(lambda: all(p.status.phase in ("Succeeded", "Failed") for p in jobs.pods(name)), 15, "replicas")
    return {p.metadata.name: json.loads(jobs.logs(p.metadata.name).strip().splitlines()[-1]) for p in pods}


def test_tfjob_replicas_see_tf_config_byte_for_byte(jobs: Jobs) -> None:
    code = DUMP.format(keys=["TF_CONFIG"])
    port = ("tfjob-port", 2222)
    jobs.create(
        job(
            "TFJob",
            "tf",
            {
                "PS": replica(code, restart="Never", container_name="tensorflow", port=port),
                "Worker": replica(code, replicas=2, restart="Never", container_name="tensorflow", port=port),
            },
        )
    )
    done = jobs.wait("TFJob", "tf", "Succeeded")
    assert conditions(done)[-1] == (
        "Succeeded",
        "True",
        "TFJobSucceeded",
        f"TFJob {jobs.namespace}/tf successfully completed.",
    )
    seen = _env_seen(jobs, "tf")
    pods = {p.metadata.name: p for p in jobs.pods("tf")}
    for name, env in seen.items():
        declared = next(e.value for e in pods[name].spec.containers[0].env if e.name == "TF_CONFIG")
        assert env["TF_CONFIG"] == declared  # the process got exactly what the pod says
    config = json.loads(seen["tf-worker-1"]["TF_CONFIG"])
    assert list(config) == ["cluster", "task", "environment"] and config["environment"] == "cloud"
    assert config["task"] == {"type": "worker", "index": 1}
    addresses = config["cluster"]["ps"] + config["cluster"]["worker"]
    assert [a.rsplit(":", 1)[0] for a in addresses] == [
        pods[n].status.pod_ip for n in ("tf-ps-0", "tf-worker-0", "tf-worker-1")
    ]
    assert len({a.rsplit(":", 1)[1] for a in addresses}) == 3  # one allocated port per replica
    assert '", "' not in seen["tf-worker-1"]["TF_CONFIG"]  # compact, like Go's json.Marshal


def test_xgboostjob_env_and_success(jobs: Jobs) -> None:
    code = DUMP.format(keys=["MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "WORKER_ADDRS"])
    port = ("xgboostjob-port", 9999)
    jobs.create(
        job(
            "XGBoostJob",
            "xgb",
            {
                "Master": replica(code, restart="Never", container_name="xgboost", port=port),
                "Worker": replica(code, replicas=2, restart="Never", container_name="xgboost", port=port),
            },
        )
    )
    done = jobs.wait("XGBoostJob", "xgb", "Succeeded")
    assert conditions(done)[-1] == (
        "Succeeded",
        "True",
        "XGBoostJobSucceeded",
        "XGBoostJob xgb is successfully completed.",
    )
    seen = _env_seen(jobs, "xgb")
    master_ip = jobs.pod("xgb-master-0").status.pod_ip
    assert {e["MASTER_ADDR"] for e in seen.values()} == {master_ip}
    assert [seen[n]["RANK"] for n in ("xgb-master-0", "xgb-worker-0", "xgb-worker-1")] == ["0", "1", "2"]
    assert seen["xgb-master-0"]["WORKER_ADDRS"] == ",".join(jobs.pod(f"xgb-worker-{i}").status.pod_ip for i in range(2))


def test_paddlejob_master_announces_its_own_pod_ip(jobs: Jobs) -> None:
    code = DUMP.format(keys=["PADDLE_MASTER", "POD_IP_DUMMY", "PADDLE_NNODES"])
    jobs.create(
        job(
            "PaddleJob",
            "pd",
            {
                "Worker": replica(code, replicas=2, restart="Never", container_name="paddle", port=("master", 36543)),
            },
        )
    )
    done = jobs.wait("PaddleJob", "pd", "Succeeded")
    assert conditions(done)[-1] == (
        "Succeeded",
        "True",
        "PaddleJobSucceeded",
        f"PaddleJob {jobs.namespace}/pd successfully completed.",
    )
    seen = _env_seen(jobs, "pd")
    ip0 = jobs.pod("pd-worker-0").status.pod_ip
    # $(POD_IP_DUMMY) expanded from status.podIP: worker 0 announces itself, worker 1 is told the same.
    assert seen["pd-worker-0"]["POD_IP_DUMMY"] == ip0
    host0, port0 = seen["pd-worker-0"]["PADDLE_MASTER"].split(":")
    assert host0 == ip0 and seen["pd-worker-1"]["PADDLE_MASTER"] == f"{ip0}:{port0}"


def test_mxjob_dmlc_env_and_failure_message(jobs: Jobs) -> None:
    code = DUMP.format(keys=["DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_WORKER", "MX_CONFIG"])
    port = ("mxjob-port", 9091)
    jobs.create(
        job(
            "MXJob",
            "mx",
            {
                "Scheduler": replica(
                    code + "; import time; time.sleep(1)", restart="Never", container_name="mxnet", port=port
                ),
                "Server": replica(code, restart="Never", container_name="mxnet", port=port),
                "Worker": replica(code + "; raise SystemExit(2)", restart="Never", container_name="mxnet", port=port),
            },
            jobMode="MXTrain",
        )
    )
    failed = jobs.wait("MXJob", "mx", "Failed")
    assert conditions(failed)[-1] == (
        "Failed",
        "True",
        "MXJobFailed",
        "mxjob mx is failed because 1 Worker replica(s) failed.",
    )
    seen = _env_seen(jobs, "mx")
    scheduler_ip = jobs.pod("mx-scheduler-0").status.pod_ip
    assert {e["DMLC_PS_ROOT_URI"] for e in seen.values()} == {scheduler_ip}
    assert seen["mx-server-0"]["DMLC_ROLE"] == "server" and seen["mx-worker-0"]["DMLC_NUM_WORKER"] == "1"


def test_jaxjob_coordinator_env(jobs: Jobs) -> None:
    code = DUMP.format(keys=["COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID"])
    jobs.create(
        job(
            "JAXJob",
            "jx",
            {
                "Worker": replica(code, replicas=2, restart="Never", container_name="jax", port=("jaxjob-port", 6666)),
            },
        )
    )
    done = jobs.wait("JAXJob", "jx", "Succeeded")
    assert conditions(done)[-1] == (
        "Succeeded",
        "True",
        "JAXJobSucceeded",
        f"JAXJob {jobs.namespace}/jx successfully completed.",
    )
    seen = _env_seen(jobs, "jx")
    assert {e["COORDINATOR_ADDRESS"] for e in seen.values()} == {jobs.pod("jx-worker-0").status.pod_ip}
    assert sorted(e["PROCESS_ID"] for e in seen.values()) == ["0", "1"]
    assert {e["NUM_PROCESSES"] for e in seen.values()} == {"2"}
