"""batch/v1 Jobs on the session control plane, driven with the real kubectl as the seed's
``package-job.yaml`` pattern and the KitOps operators' cluster mode use them: pods as real
processes, ``kubectl wait --for=condition=complete``, backoffLimit, deadline, TTL, suspend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_provider_training.embedded import ControlPlane
from tests.waiting import alive, wait_for

PY = sys.executable
KUBECTL = Path(sys.executable).with_name("kubectl")


class Kubectl:
    def __init__(self, plane: ControlPlane, namespace: str, tmp: Path) -> None:
        self.plane, self.namespace, self.tmp = plane, namespace, tmp

    def __call__(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(self.plane.kubeconfig), "-n", self.namespace, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def apply(self, doc: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        path = self.tmp / f"{doc['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(doc))
        return self("apply", "-f", str(path))

    def json(self, *args: str) -> Any:
        out = self("get", *args, "-o", "json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def pods(self, job: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.json("pods", "-l", f"batch.kubernetes.io/job-name={job}")["items"]
        return items


def batch_job(name: str, code: str, restart: str = "Never", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            **spec,
            "template": {
                "spec": {
                    "restartPolicy": restart,
                    "containers": [{"name": "main", "image": "python:3.11", "command": [PY, "-c", code]}],
                }
            },
        },
    }


@pytest.fixture
def kubectl(control_plane: ControlPlane, test_namespace: str, tmp_path: Path) -> Kubectl:
    return Kubectl(control_plane, test_namespace, tmp_path)


def conditions(job: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(c["type"], c["status"], c["reason"], c["message"]) for c in job["status"].get("conditions") or []]


def test_job_completes_and_kubectl_wait_for_complete_returns(kubectl: Kubectl) -> None:
    applied = kubectl.apply(batch_job("pack", "print('packed the model')"))
    assert applied.returncode == 0, applied.stderr
    waited = kubectl("wait", "--for=condition=complete", "job/pack", "--timeout=30s", timeout=40)
    assert waited.returncode == 0, waited.stderr
    assert "job.batch/pack condition met" in waited.stdout

    job = kubectl.json("job", "pack")
    assert conditions(job) == [
        ("SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods"),
        ("Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods"),
    ]
    status = job["status"]
    assert status["succeeded"] == 1 and "failed" not in status and "active" not in status
    assert status["startTime"] <= status["completionTime"]
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert (job["spec"]["completions"], job["spec"]["parallelism"], job["spec"]["backoffLimit"]) == (1, 1, 6)

    (pod,) = kubectl.pods("pack")
    labels = pod["metadata"]["labels"]
    assert labels["batch.kubernetes.io/job-name"] == labels["job-name"] == "pack"
    assert labels["batch.kubernetes.io/controller-uid"] == labels["controller-uid"] == uid
    assert pod["metadata"]["name"].startswith("pack-") and pod["metadata"]["generateName"] == "pack-"
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Job", "pack", uid, True)
    assert pod["status"]["phase"] == "Succeeded"
    assert kubectl("logs", "job/pack").stdout.strip() == "packed the model"
    listed = kubectl("get", "jobs").stdout
    assert "pack" in listed and "Complete" in listed and "1/1" in listed
    described = kubectl("describe", "job", "pack").stdout
    assert "SuccessfulCreate" in described and "Completed" in described


def test_never_replaces_failed_pods_until_backoff_limit(kubectl: Kubectl) -> None:
    assert kubectl.apply(batch_job("flaky", "raise SystemExit(2)", backoffLimit=1)).returncode == 0
    waited = kubectl("wait", "--for=condition=failed", "job/flaky", "--timeout=30s", timeout=40)
    assert waited.returncode == 0, waited.stderr
    job = kubectl.json("job", "flaky")
    assert conditions(job) == [
        ("FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
        ("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
    ]
    assert job["status"]["failed"] == 2 and "completionTime" not in job["status"]
    pods = kubectl.pods("flaky")
    assert len(pods) == 2 and {p["status"]["phase"] for p in pods} == {"Failed"}  # failed pods are kept
    assert {p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] for p in pods} == {2}
    assert "BackoffLimitExceeded" in kubectl("describe", "job", "flaky").stdout


def test_onfailure_restarts_in_place_and_completes(kubectl: Kubectl, tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    crash_once = (
        f"import os, sys; m = {str(marker)!r}\n"
        "if not os.path.exists(m):\n    open(m, 'w').close(); sys.exit(1)\n"
        "print('second run')"
    )
    assert kubectl.apply(batch_job("retry", crash_once, restart="OnFailure")).returncode == 0
    assert kubectl("wait", "--for=condition=complete", "job/retry", "--timeout=30s", timeout=40).returncode == 0
    (pod,) = kubectl.pods("retry")
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 1
    assert kubectl.json("job", "retry")["status"]["succeeded"] == 1


def test_active_deadline_stops_the_pod_on_time(kubectl: Kubectl) -> None:
    code = "import time; print('up', flush=True); time.sleep(60)"
    assert kubectl.apply(batch_job("slow", code, activeDeadlineSeconds=2)).returncode == 0
    pid = wait_for(lambda: _running_pid(kubectl, "slow"), 15, "the pod to run")
    waited = kubectl("wait", "--for=condition=failed", "job/slow", "--timeout=10s", timeout=20)
    assert waited.returncode == 0, waited.stderr
    job = kubectl.json("job", "slow")
    assert conditions(job)[-1] == (
        "Failed",
        "True",
        "DeadlineExceeded",
        "Job was active longer than specified deadline",
    )
    wait_for(lambda: not alive(pid), 10, "the process to be stopped")
    assert kubectl.pods("slow") == []


def test_ttl_after_finished_deletes_the_job_and_its_pods(kubectl: Kubectl) -> None:
    # (long enough that the wait below starts before the job ends: the TTL then removes it within 1 s)
    code = "import time; print('up', flush=True); time.sleep(3)"
    assert kubectl.apply(batch_job("short", code, ttlSecondsAfterFinished=1)).returncode == 0
    pid = wait_for(lambda: _running_pid(kubectl, "short"), 15, "the pod to run")
    assert kubectl("wait", "--for=condition=complete", "job/short", "--timeout=20s", timeout=30).returncode == 0
    assert not alive(pid)
    gone = kubectl("wait", "--for=delete", "job/short", "--timeout=10s", timeout=20)
    assert gone.returncode == 0, gone.stderr
    assert kubectl.pods("short") == []


def test_completions_with_parallelism(kubectl: Kubectl) -> None:
    code = "import os, time; time.sleep(0.2); print(os.environ['HOSTNAME'])"
    assert kubectl.apply(batch_job("three", code, completions=3, parallelism=2)).returncode == 0
    assert kubectl("wait", "--for=condition=complete", "job/three", "--timeout=30s", timeout=40).returncode == 0
    pods = kubectl.pods("three")
    assert len(pods) == 3 and all(p["status"]["phase"] == "Succeeded" for p in pods)
    assert kubectl.json("job", "three")["status"]["succeeded"] == 3


def test_suspend_deletes_the_pod_and_resume_runs_it(kubectl: Kubectl) -> None:
    assert kubectl.apply(batch_job("later", "print('ran')", suspend=True)).returncode == 0
    waited = kubectl("wait", "--for=condition=suspended", "job/later", "--timeout=10s", timeout=20)
    assert waited.returncode == 0, waited.stderr
    assert kubectl.pods("later") == []
    assert kubectl("patch", "job", "later", "--type=merge", "-p", '{"spec":{"suspend":false}}').returncode == 0
    assert kubectl("wait", "--for=condition=complete", "job/later", "--timeout=20s", timeout=30).returncode == 0
    job = kubectl.json("job", "later")
    suspended = next(c for c in job["status"]["conditions"] if c["type"] == "Suspended")
    assert (suspended["status"], suspended["reason"]) == ("False", "JobResumed")


def test_restart_policy_always_is_refused_with_upstreams_answer(kubectl: Kubectl) -> None:
    applied = kubectl.apply(batch_job("bad", "pass", restart="Always"))
    assert applied.returncode != 0
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never"' in (
        applied.stderr
    )


def _running_pid(kubectl: Kubectl, job: str) -> int | None:
    for pod in kubectl.pods(job):
        for cs in pod["status"].get("containerStatuses") or []:
            if "running" in cs.get("state", {}) and cs.get("containerID"):
                return int(cs["containerID"].split("//")[1])
    return None
