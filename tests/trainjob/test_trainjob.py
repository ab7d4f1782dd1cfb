"""TrainJob end to end on the session control plane: served kinds, admission, the default runtimes,
and TrainJob → JobSet → Indexed Jobs → Pods running real processes (torchrun over 2 nodes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from airflow_provider_training.embedded import ControlPlane
from tests.trainjob.helpers import PRINT_ENV, PY, TrainJobs, runtime, trainjob
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "dags" / "code" / "train.py"


@pytest.fixture
def tj(kube_api: Any, test_namespace: str, control_plane: ControlPlane) -> TrainJobs:
    return TrainJobs(kube_api, test_namespace, control_plane.kubeconfig)


def test_kubectl_serves_the_trainer_kinds_and_default_runtimes(tj: TrainJobs) -> None:
    resources = tj.kubectl("api-resources", "--api-group=trainer.kubeflow.org", "-o", "wide")
    assert resources.returncode == 0, resources.stderr
    lines = {line.split()[0]: line for line in resources.stdout.splitlines()[1:]}
    assert set(lines) == {"clustertrainingruntimes", "trainingruntimes", "trainjobs"}
    assert " false " in lines["clustertrainingruntimes"] and " true " in lines["trainjobs"]
    assert "jobsets" in tj.kubectl("api-resources", "--api-group=jobset.x-k8s.io").stdout
    listed = tj.kubectl("get", "clustertrainingruntimes")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()[1:]]
    assert {"torch-distributed", "jax-distributed", "xgboost-distributed", "deepspeed-distributed"} <= set(names)
    crd = tj.kubectl("get", "crd", "trainjobs.trainer.kubeflow.org", "-o", "jsonpath={.spec.scope}")
    assert crd.stdout == "Namespaced"


def test_admission_answers_with_the_webhooks_messages(tj: TrainJobs) -> None:
    bad = trainjob("reserved", numNodes=2, env=[{"name": "PET_NNODES", "value": "3"}], image="python:3.11")
    with pytest.raises(ApiException) as refused:
        tj.create(bad)
    # Trainer's validating webhook denies (403, as controller-runtime answers a plain error).
    assert refused.value.status == 403
    body = json.loads(refused.value.body)
    assert body["message"].startswith(
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
    )
    assert "must not have reserved envs, invalid envs configured: [PET_NNODES]" in body["message"]
    with pytest.raises(ApiException) as missing:
        tj.create(trainjob("nort", runtime="no-such-runtime"))
    assert missing.value.status == 403
    with pytest.raises(ApiException) as long_name:
        tj.create(trainjob("x" * 64, numNodes=1))
    assert long_name.value.status == 422  # the CRD's CEL rule, before any webhook
    assert "must be no more than 63 characters" in long_name.value.body
    assert (
        'clustertrainingruntimes.trainer.kubeflow.org "no-such-runtime" not found'
        in json.loads(missing.value.body)["message"]
    )
    assert "reserved" not in tj.kubectl("get", "trainjobs").stdout


def test_torch_trainjob_trains_digits_on_two_nodes_under_torchrun(tj: TrainJobs, tmp_path: Path) -> None:
    out = tmp_path / "out"
    command = ["bash", "-c", f'{PY} -c "{PRINT_ENV}" && exec torchrun "$@"', "--"]
    args = [str(TRAIN), "--epochs", "2", "--output", str(out)]
    tj.create(trainjob("digits", numNodes=2, command=command, args=args, resourcesPerNode={"requests": {"cpu": 1}}))
    waited = tj.kubectl("wait", "--for=condition=Complete", "trainjob/digits", "--timeout=240s", timeout=260)
    assert waited.returncode == 0, (waited.stderr, tj.get("digits").get("status"))
    done = tj.get("digits")
    complete = next(c for c in done["status"]["conditions"] if c["type"] == "Complete")
    assert (complete["reason"], complete["message"]) == ("AllJobsCompleted", "jobset completed successfully")
    assert done["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]
    listed = tj.kubectl("get", "trainjobs")
    assert listed.stdout.split("\n")[0].split() == ["NAME", "STATE", "AGE"]
    assert listed.stdout.split("\n")[1].split()[:2] == ["digits", "Complete"]

    jobset = tj.jobset("digits")
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    assert jobset["status"]["terminalState"] == "Completed"
    jobs = tj.batch.list_namespaced_job(tj.namespace).items
    assert [j.metadata.name for j in jobs] == ["digits-node-0"]
    assert jobs[0].spec.completion_mode == "Indexed" and jobs[0].spec.completions == 2
    assert jobs[0].metadata.labels["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    service = tj.core.read_namespaced_service("digits", tj.namespace)
    assert service.spec.cluster_ip == "None"

    pods = sorted(tj.pods("digits"), key=lambda p: p.metadata.name)
    assert [p.metadata.name[: len("digits-node-0-0")] for p in pods] == ["digits-node-0-0", "digits-node-0-1"]
    assert [p.metadata.labels["batch.kubernetes.io/job-completion-index"] for p in pods] == ["0", "1"]
    assert [p.spec.hostname for p in pods] == ["digits-node-0-0", "digits-node-0-1"]
    assert all(p.spec.subdomain == "digits" for p in pods)
    envs = [json.loads(tj.logs(p.metadata.name).splitlines()[0]) for p in pods]
    assert [e["PET_NODE_RANK"] for e in envs] == ["0", "1"]
    assert [e["JOB_COMPLETION_INDEX"] for e in envs] == ["0", "1"]
    assert {e["PET_NNODES"] for e in envs} == {"2"} and {e["PET_NPROC_PER_NODE"] for e in envs} == {"1"}
    # DNS names become the loopback address node-0 got; the rendezvous port is a free one.
    assert {e["PET_MASTER_ADDR"] for e in envs} == {pods[0].status.pod_ip}
    assert envs[0]["HOSTNAME"] == "digits-node-0-0"
    env_spec = {
        e["name"]: e.get("value")
        for e in jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env_spec["PET_MASTER_ADDR"] == "digits-node-0-0.digits"  # the JobSet keeps upstream's value
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["accuracy"] > 0.5
    # train.py reported its progress to Trainer's status server after each epoch (the last one always)
    progress = done["status"]["trainerStatus"]
    assert (progress["progressPercentage"], progress["estimatedRemainingSeconds"]) == (100, 0)
    assert [m["name"] for m in progress["metrics"]] == ["loss", "accuracy"]
    assert float(progress["metrics"][0]["value"]) == pytest.approx(metrics["loss"], abs=1e-4)
    assert "rank 1: test accuracy" in tj.logs(pods[1].metadata.name)


def test_failed_node_restarts_the_jobset_then_fails_with_upstreams_reason(tj: TrainJobs) -> None:
    tj.create(
        runtime(
            "fail-fast",
            {"numNodes": 1, "torch": {}},
            job_spec={"backoffLimit": 0},
            failurePolicy={"maxRestarts": 1},
        )
    )
    code = "import os, sys; print('rank', os.environ['PET_NODE_RANK']); sys.exit(3 if os.environ['PET_NODE_RANK'] == '1' else 0)"
    tj.create(trainjob("crash", runtime="fail-fast", kind="TrainingRuntime", numNodes=2, command=[PY, "-c", code]))
    failed = tj.wait_condition("crash", "Failed", timeout=120)
    assert failed["reason"] == "ReachedMaxRestarts"
    assert failed["message"] == "jobset failed due to reaching max number of restarts (first failed job: crash-node-0)"
    jobset = tj.jobset("crash")
    assert jobset["status"]["restarts"] == 1 and jobset["status"]["restartsCountTowardsMax"] == 1
    assert tj.kubectl("get", "trainjob", "crash", "-o", "jsonpath={.status.conditions[-1:].type}").stdout == "Failed"


def test_suspend_resume_and_deletion_cleans_up(tj: TrainJobs) -> None:
    body = trainjob("paused", numNodes=2, command=[PY, "-c", PRINT_ENV])
    body["spec"]["suspend"] = True
    tj.create(body)
    suspended = tj.wait_condition("paused", "Suspended", timeout=60)
    assert (suspended["reason"], suspended["message"]) == ("Suspended", "TrainJob is suspended")
    wait_for(lambda: bool(tj.batch.list_namespaced_job(tj.namespace).items), 30, "the suspended Job", interval=0.1)
    assert tj.batch.list_namespaced_job(tj.namespace).items[0].spec.suspend is True
    assert tj.pods("paused") == []
    tj.patch("paused", {"spec": {"suspend": False}})
    tj.wait_condition("paused", "Complete", timeout=120)
    resumed = next(c for c in tj.get("paused")["status"]["conditions"] if c["type"] == "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "Resumed")
    assert len(tj.pods("paused")) == 2

    deleted = tj.kubectl("delete", "trainjob", "paused")
    assert deleted.returncode == 0, deleted.stderr
    wait_for(
        lambda: not tj.pods("paused") and not tj.batch.list_namespaced_job(tj.namespace).items,
        30,
        "JobSet, Jobs and Pods to be garbage-collected",
        interval=0.1,
    )
    assert "paused" not in tj.kubectl("get", "jobsets").stdout


def test_jax_and_xgboost_environment_reaches_the_replicas(tj: TrainJobs) -> None:
    tj.create(trainjob("jx", runtime="jax-distributed", numNodes=2, image="python:3.11", command=[PY, "-c", PRINT_ENV]))
    tj.create(runtime("xgb", {"numNodes": 1, "xgboost": {}}))
    tj.create(trainjob("xg", runtime="xgb", kind="TrainingRuntime", numNodes=2, command=[PY, "-c", PRINT_ENV]))
    for name in ("jx", "xg"):
        tj.wait_condition(name, "Complete", timeout=120)
    jax = [json.loads(tj.logs(p.metadata.name)) for p in sorted(tj.pods("jx"), key=lambda p: p.metadata.name)]
    assert [e["JAX_PROCESS_ID"] for e in jax] == ["0", "1"] and {e["JAX_NUM_PROCESSES"] for e in jax} == {"2"}
    address = {e["JAX_COORDINATOR_ADDRESS"] for e in jax}
    assert len(address) == 1 and address.pop().startswith("127.")
    xgb = [json.loads(tj.logs(p.metadata.name)) for p in sorted(tj.pods("xg"), key=lambda p: p.metadata.name)]
    assert [e["DMLC_TASK_ID"] for e in xgb] == ["0", "1"] and {e["DMLC_NUM_WORKER"] for e in xgb} == {"2"}
    tracker = {p.metadata.labels["batch.kubernetes.io/job-completion-index"]: p.status.pod_ip for p in tj.pods("xg")}
    assert {e["DMLC_TRACKER_URI"] for e in xgb} == {tracker["0"]}
    assert len({e["DMLC_TRACKER_PORT"] for e in xgb}) == 1 and xgb[0]["DMLC_TRACKER_PORT"] != "29500"


def test_active_deadline_fails_the_trainjob_and_deletes_its_jobset(tj: TrainJobs) -> None:
    body = trainjob("slow", numNodes=1, command=[PY, "-c", "import time; time.sleep(60)"])
    body["spec"]["activeDeadlineSeconds"] = 2
    tj.create(body)
    failed = tj.wait_condition("slow", "Failed", timeout=60)
    assert (failed["reason"], failed["message"]) == ("DeadlineExceeded", "TrainJob exceeded its active deadline")
    wait_for(lambda: not tj.pods("slow"), 30, "the deadline's JobSet deletion to remove the pods", interval=0.1)
