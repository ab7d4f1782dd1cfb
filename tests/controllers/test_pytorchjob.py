"""PyTorchJob end to end on the session control plane: pods, Services, env, conditions, restarts,
run policy — what a user sees through the Kubernetes API while real processes run."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.controllers.jobs import Jobs, conditions
from tests.factories import job_document as job
from tests.factories import replica
from tests.waiting import alive, wait_for

PRINT_ENV = (
    "import json, os, time; time.sleep({sleep}); "
    "print(json.dumps({{k: os.environ.get(k) for k in "
    "['MASTER_ADDR', 'MASTER_PORT', 'RANK', 'WORLD_SIZE', 'PET_NNODES', 'HOSTNAME']}}))"
)


@pytest.fixture
def jobs(kube_api: Any, test_namespace: str) -> Jobs:
    return Jobs(kube_api, test_namespace)


def test_master_and_workers_run_as_processes_and_succeed(jobs: Jobs) -> None:
    port = ("pytorchjob-port", 23456)
    jobs.create(
        job(
            "PyTorchJob",
            "pj",
            {
                "Master": replica(PRINT_ENV.format(sleep=0.5), port=port),
                "Worker": replica(PRINT_ENV.format(sleep=0.2), replicas=2, port=port),
            },
        )
    )
    done = jobs.wait("PyTorchJob", "pj", "Succeeded")
    assert conditions(done) == [
        ("Created", "True", "PyTorchJobCreated", "PyTorchJob pj is created."),
        ("Running", "False", "PyTorchJobRunning", "PyTorchJob pj is running."),
        ("Succeeded", "True", "PyTorchJobSucceeded", "PyTorchJob pj is successfully completed."),
    ]
    status = done["status"]
    assert status["startTime"] <= status["completionTime"]
    assert status["replicaStatuses"]["Master"]["succeeded"] == 1

    pods = {p.metadata.name: p for p in jobs.pods("pj")}
    assert sorted(pods) == ["pj-master-0", "pj-worker-0", "pj-worker-1"]
    master = pods["pj-master-0"]
    assert master.metadata.labels["training.kubeflow.org/job-role"] == "master"
    assert "training.kubeflow.org/job-role" not in pods["pj-worker-0"].metadata.labels
    assert pods["pj-worker-1"].metadata.labels["training.kubeflow.org/replica-index"] == "1"
    assert master.metadata.owner_references[0].kind == "PyTorchJob"
    services = jobs.core.list_namespaced_service(jobs.namespace).items
    assert sorted(s.metadata.name for s in services) == sorted(pods)
    assert all(s.spec.cluster_ip == "None" for s in services)

    # Every pod has its own loopback address; all replicas were told the master's address and one
    # allocated port (not the declared 23456, which concurrent jobs would share).
    ips = {name: p.status.pod_ip for name, p in pods.items()}
    assert len(set(ips.values())) == 3 and all(ip.startswith("127.") for ip in ips.values())
    wait_for(lambda: all(p.status.phase == "Succeeded" for p in jobs.pods("pj")), 10, "workers to finish")
    seen = {name: json.loads(jobs.logs(name).strip()) for name in pods}
    assert {s["MASTER_ADDR"] for s in seen.values()} == {ips["pj-master-0"]}
    assert len({s["MASTER_PORT"] for s in seen.values()}) == 1 and seen["pj-master-0"]["MASTER_PORT"] != "23456"
    assert [seen[n]["RANK"] for n in sorted(seen)] == ["0", "1", "2"]
    assert {s["WORLD_SIZE"] for s in seen.values()} == {"3"}
    assert seen["pj-worker-1"]["HOSTNAME"] == "pj-worker-1"
    reasons = [e.reason for e in jobs.events("pj")]
    assert reasons.count("SuccessfulCreatePod") == 3 and "ExitedWithCode" in reasons


def test_sigkilled_worker_restarts_in_place_under_onfailure(jobs: Jobs) -> None:
    crash_once = (
        "import os, signal; marker = '/scratch/crashed'\n"
        "if not os.path.exists(marker):\n"
        "    open(marker, 'w').close(); print('first run', flush=True); os.kill(os.getpid(), signal.SIGKILL)\n"
        "print('second run')"
    )
    scratch = {
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "container": {"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]},
    }
    jobs.create(
        job(
            "PyTorchJob",
            "crash",
            {
                "Master": replica("import time; time.sleep(1.5)"),
                "Worker": replica(crash_once, **scratch),
            },
        )
    )
    done = jobs.wait("PyTorchJob", "crash", "Succeeded")
    assert done["status"]["conditions"][-1]["reason"] == "PyTorchJobSucceeded"
    worker = jobs.pod("crash-worker-0")
    status = worker.status.container_statuses[0]
    assert status.restart_count == 1
    assert status.last_state.terminated.exit_code == 137
    assert status.state.terminated.exit_code == 0
    assert jobs.logs("crash-worker-0").strip() == "second run"
    assert jobs.logs("crash-worker-0", previous=True).strip() == "first run"
    assert "BackOff" in [e.reason for e in jobs.events("crash-worker-0")]


def test_failed_worker_under_never_fails_the_job_with_the_operators_message(jobs: Jobs) -> None:
    jobs.create(
        job(
            "PyTorchJob",
            "never",
            {
                "Master": replica("import time; time.sleep(0.5)", restart="Never"),
                "Worker": replica("raise SystemExit(3)", restart="Never"),
            },
        )
    )
    failed = jobs.wait("PyTorchJob", "never", "Failed")
    last = failed["status"]["conditions"][-1]
    assert (last["reason"], last["message"]) == (
        "PyTorchJobFailed",
        "PyTorchJob never is failed because 1 Worker replica(s) failed.",
    )
    assert failed["status"]["completionTime"]
    assert jobs.pod("never-worker-0").status.container_statuses[0].state.terminated.exit_code == 3


def test_exit_code_policy_retries_137_and_fails_on_1(jobs: Jobs, tmp_path: Any) -> None:
    once = tmp_path / "once"
    retry_then_pass = (
        f"import os, signal; m = {str(once)!r}\n"
        "if not os.path.exists(m):\n    open(m, 'w').close(); os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    jobs.create(
        job(
            "PyTorchJob",
            "ec137",
            {
                "Master": replica("import time; time.sleep(1)", restart="ExitCode"),
                "Worker": replica(retry_then_pass, restart="ExitCode"),
            },
        )
    )
    done = jobs.wait("PyTorchJob", "ec137", "Succeeded")
    reasons = [e.reason for e in jobs.events("ec137")]
    assert "PyTorchJobRestarting" in reasons
    assert reasons.count("SuccessfulDeletePod") >= 1  # the failed pod was recreated under its name
    assert done["metadata"]["annotations"]["training.airflow.apache.org/exit-code-retries"] == "1"

    jobs.create(
        job(
            "PyTorchJob",
            "ec1",
            {
                "Master": replica("import time; time.sleep(1)", restart="ExitCode"),
                "Worker": replica("raise SystemExit(1)", restart="ExitCode"),
            },
        )
    )
    failed = jobs.wait("PyTorchJob", "ec1", "Failed")
    last = failed["status"]["conditions"][-1]
    assert (last["reason"], last["message"]) == (
        "PyTorchJobFailed",
        'job "ec1" is failing because "Worker" replica(s) failed.',
    )
    assert failed["status"]["completionTime"]  # fixed here; upstream leaves it unset


def test_backoff_limit_fails_the_job(jobs: Jobs) -> None:
    jobs.create(
        job(
            "PyTorchJob",
            "backoff",
            {
                "Master": replica("raise SystemExit(1)"),
            },
            runPolicy={"backoffLimit": 2, "cleanPodPolicy": "All"},
        )
    )
    failed = jobs.wait("PyTorchJob", "backoff", "Failed")
    assert failed["status"]["conditions"][-1]["message"] == (
        "Job backoff has failed because it has reached the specified backoff limit"
    )
    wait_for(lambda: not jobs.pods("backoff"), 10, "cleanPodPolicy All to delete the pods")


def test_active_deadline_is_enforced_on_time(jobs: Jobs) -> None:
    jobs.create(
        job(
            "PyTorchJob",
            "deadline",
            {
                "Master": replica("import time; print('up', flush=True); time.sleep(60)"),
            },
            # 3 s: time to see the replica Running (and its pid) on a loaded machine before it is stopped
            runPolicy={"activeDeadlineSeconds": 3, "cleanPodPolicy": "Running"},
        )
    )
    running: list[Any] = []

    def master_running() -> bool:  # one list per look: the pod may go between two
        pods = jobs.pods("deadline")
        running[:] = [
            p
            for p in pods
            if p.status.phase == "Running"
            and p.status.container_statuses
            and p.status.container_statuses[0].container_id
        ]
        return bool(running)

    wait_for(master_running, 10, "running")
    pid = int(running[0].status.container_statuses[0].container_id.split("//")[1])
    started = time.monotonic()
    failed = jobs.wait("PyTorchJob", "deadline", "Failed", timeout=40)
    # a timer, not the next unrelated event (the replica would sleep 60 s); the margin is for a
    # loaded CI machine, where 3 s failed once
    assert time.monotonic() - started < 30
    assert failed["status"]["conditions"][-1]["message"] == (
        "Job deadline has failed because it was active longer than specified deadline"
    )
    wait_for(lambda: not alive(pid), 10, "the replica process to be stopped")


def test_suspend_then_resume(jobs: Jobs) -> None:
    jobs.create(job("PyTorchJob", "susp", {"Master": replica("print('ran')")}, runPolicy={"suspend": True}))
    wait_for(
        lambda: any(
            c["type"] == "Suspended" for c in (jobs.get("PyTorchJob", "susp").get("status") or {}).get("conditions", [])
        ),
        10,
        "Suspended",
    )
    time.sleep(0.3)
    assert jobs.pods("susp") == []
    jobs.patch("PyTorchJob", "susp", {"spec": {"runPolicy": {"suspend": False}}})
    done = jobs.wait("PyTorchJob", "susp", "Succeeded")
    suspended = next(c for c in done["status"]["conditions"] if c["type"] == "Suspended")
    assert (suspended["status"], suspended["reason"], suspended["message"]) == (
        "False",
        "PyTorchJobResumed",
        "PyTorchJob susp is resumed.",
    )
    assert jobs.logs("susp-master-0").strip() == "ran"


def test_deleting_a_running_job_stops_its_processes_and_keeps_pvc_data(jobs: Jobs, control_plane: Any) -> None:
    code = "open('/output/result.txt', 'w').write('kept'); print('written', flush=True); import time; time.sleep(60)"
    pvc = {
        "volumes": [{"name": "out", "persistentVolumeClaim": {"claimName": "results"}}],
        "container": {"volumeMounts": [{"name": "out", "mountPath": "/output"}]},
    }
    jobs.create(job("PyTorchJob", "victim", {"Master": replica(code, **pvc)}))
    wait_for(lambda: jobs.pods("victim") and "written" in _safe_logs(jobs, "victim-master-0"), 15, "the write")
    # the node reports the running container a moment after it started (as a kubelet's status sync)
    wait_for(
        lambda: any(c.container_id for c in jobs.pods("victim")[0].status.container_statuses or []),
        10,
        "the running container in the status",
    )
    pid = int(jobs.pods("victim")[0].status.container_statuses[0].container_id.split("//")[1])
    jobs.delete("PyTorchJob", "victim")
    wait_for(lambda: not alive(pid), 10, "the replica process to end")
    wait_for(lambda: not jobs.pods("victim"), 10, "the pods to be garbage-collected")
    claim = control_plane.home / "volumes" / "pvc" / jobs.namespace / "results" / "result.txt"
    assert claim.read_text() == "kept"


def _safe_logs(jobs: Jobs, pod: str) -> str:
    try:
        return jobs.logs(pod)
    except Exception:
        return ""


def test_ttl_after_finished_deletes_the_job_and_its_pods(jobs: Jobs) -> None:
    jobs.create(
        job("PyTorchJob", "ttl", {"Master": replica("print('done')")}, runPolicy={"ttlSecondsAfterFinished": 1})
    )
    jobs.wait("PyTorchJob", "ttl", "Succeeded")
    assert jobs.pods("ttl")  # kept until the TTL runs out

    def gone() -> bool:
        try:
            jobs.get("PyTorchJob", "ttl")
        except Exception as exc:  # ApiException 404
            return getattr(exc, "status", None) == 404
        return False

    wait_for(gone, 10, "the TTL to delete the job")
    wait_for(lambda: not jobs.pods("ttl"), 10, "its pods to be garbage-collected")
    assert not jobs.core.list_namespaced_service(
        jobs.namespace, label_selector="training.kubeflow.org/job-name=ttl"
    ).items


def test_scaling_workers_down_deletes_the_surplus_indices(jobs: Jobs, tmp_path: Any) -> None:
    gate = tmp_path / "gate"
    wait_gate = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.02)"
    jobs.create(
        job(
            "PyTorchJob",
            "shrink",
            {"Master": replica(wait_gate), "Worker": replica(wait_gate, replicas=3)},
        )
    )
    wait_for(
        lambda: len(jobs.pods("shrink")) == 4 and all(p.status.phase == "Running" for p in jobs.pods("shrink")),
        20,
        "4 running replicas",
    )
    pids = {
        p.metadata.name: int(p.status.container_statuses[0].container_id.split("//")[1]) for p in jobs.pods("shrink")
    }
    jobs.patch("PyTorchJob", "shrink", {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1}}}})
    wait_for(
        lambda: sorted(p.metadata.name for p in jobs.pods("shrink")) == ["shrink-master-0", "shrink-worker-0"],
        10,
        "worker-1 and worker-2 to be deleted",
    )
    wait_for(lambda: not alive(pids["shrink-worker-1"]) and not alive(pids["shrink-worker-2"]), 10, "their processes")
    assert alive(pids["shrink-worker-0"]) and alive(pids["shrink-master-0"])
    services = jobs.core.list_namespaced_service(jobs.namespace, label_selector="training.kubeflow.org/job-name=shrink")
    assert sorted(s.metadata.name for s in services.items) == ["shrink-master-0", "shrink-worker-0"]
    messages = [e.message for e in jobs.events("shrink") if e.reason == "SuccessfulDeletePod"]
    assert sorted(messages) == ["Deleted pod: shrink-worker-1", "Deleted pod: shrink-worker-2"]
    gate.touch()
    jobs.wait("PyTorchJob", "shrink", "Succeeded")  # the remaining replicas finish the job
