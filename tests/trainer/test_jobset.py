"""JobSet v0.12.0 controller decisions (child Jobs, Service, status, success/failure policy,
dependsOn) on the JobSets the trainer builds, against ``trainer-v2.md`` §7 and §8."""

from __future__ import annotations

import hashlib
from typing import Any

from airflow_provider_training.frameworks.trainer import build
from airflow_provider_training.frameworks.trainer import jobset as js
from airflow_provider_training.specs.trainer import default_runtimes, documents
from airflow_provider_training.specs.trainer.crds import JOBSET, openapi_schema
from airflow_provider_training.specs.trainer.jobset_webhook import jobset_defaults
from airflow_provider_training.specs.trainer.models import TrainJob
from airflow_provider_training.specs.trainer.schema import with_defaults
from tests.factories import mutate, trainjob


def _jobset(runtime: str = "torch-distributed", **trainer: Any) -> dict[str, Any]:
    doc = trainjob(runtime_name=runtime, **trainer)
    doc["metadata"] = {"name": "tj", "namespace": "ns", "uid": "tj-uid"}
    job = documents.check_document(doc).object
    assert isinstance(job, TrainJob)
    built = build(job, default_runtimes()[runtime]).jobset
    built["metadata"]["uid"] = "js-uid"
    return jobset_defaults(with_defaults(built, openapi_schema(JOBSET)))


def _done(job: dict[str, Any], kind: str, when: str = "2026-01-01T00:00:00Z", reason: str = "") -> dict[str, Any]:
    condition = {"type": kind, "status": "True", "lastTransitionTime": when, "reason": reason, "message": ""}
    return mutate(job, "status", {"conditions": [condition]})


def test_child_job_of_the_worked_example() -> None:
    jobset = _jobset(numNodes=2)
    (job,) = js.child_jobs(jobset)
    assert job["metadata"]["name"] == "tj-node-0" and job["metadata"]["namespace"] == "ns"
    labels = job["metadata"]["labels"]
    assert labels == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
        "jobset.sigs.k8s.io/jobset-name": "tj",
        "jobset.sigs.k8s.io/jobset-uid": "js-uid",
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "jobset.sigs.k8s.io/restart-attempt": "0",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
        "jobset.sigs.k8s.io/global-replicas": "1",
        "jobset.sigs.k8s.io/job-index": "0",
        "jobset.sigs.k8s.io/job-key": hashlib.sha1(b"ns/tj-node-0").hexdigest(),
        "jobset.sigs.k8s.io/job-global-index": "0",
        "jobset.sigs.k8s.io/group-name": "default",
        "jobset.sigs.k8s.io/group-replicas": "1",
        "jobset.sigs.k8s.io/job-group-index": "0",
    }
    spec = job["spec"]
    assert (spec["parallelism"], spec["completions"], spec["completionMode"], spec["suspend"]) == (
        2,
        2,
        "Indexed",
        False,
    )
    pod = spec["template"]
    assert pod["spec"]["subdomain"] == "tj" and pod["spec"]["restartPolicy"] == "OnFailure"
    assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
    assert "trainer.kubeflow.org/trainjob-ancestor-step" not in pod["metadata"]["labels"]  # Job template labels only
    assert js.headless_service(jobset) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "tj", "namespace": "ns"},
        "spec": {
            "clusterIP": "None",
            "selector": {"jobset.sigs.k8s.io/jobset-name": "tj"},
            "publishNotReadyAddresses": True,
        },
    }


def test_mpi_jobs_global_indexes_and_depends_on() -> None:
    jobset = _jobset("deepspeed-distributed", numNodes=3)
    node, launcher = js.child_jobs(jobset)
    assert [node["metadata"]["name"], launcher["metadata"]["name"]] == ["tj-node-0", "tj-launcher-0"]
    assert launcher["metadata"]["labels"]["jobset.sigs.k8s.io/job-global-index"] == "1"
    assert launcher["metadata"]["labels"]["jobset.sigs.k8s.io/global-replicas"] == "2"
    rjobs = jobset["spec"]["replicatedJobs"]
    statuses = js.replicated_jobs_status(jobset, js.classify(jobset, [node]))
    assert not js.depends_on_met(rjobs[1], statuses, jobset)
    ready = mutate(node, "status", {"ready": 2, "active": 2})
    statuses = js.replicated_jobs_status(jobset, js.classify(jobset, [ready]))
    assert statuses == [
        {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0},
        {"name": "launcher", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0},
    ]
    assert js.depends_on_met(rjobs[1], statuses, jobset)
    done = js.classify(jobset, [ready, _done(launcher, "Complete")])
    assert js.success_policy_met(jobset, done)  # targets only the launcher: the sshd nodes are still running


def test_success_needs_every_targeted_job() -> None:
    jobset = mutate(_jobset(numNodes=2), "spec.replicatedJobs[0].replicas", 2)
    first, second = js.child_jobs(jobset)
    assert second["metadata"]["name"] == "tj-node-1"
    assert not js.success_policy_met(jobset, js.classify(jobset, [_done(first, "Complete"), second]))
    assert js.success_policy_met(jobset, js.classify(jobset, [_done(first, "Complete"), _done(second, "Complete")]))
    anyone = mutate(jobset, "spec.successPolicy", {"operator": "Any"})
    assert js.success_policy_met(anyone, js.classify(anyone, [_done(first, "Complete"), second]))


def test_failure_policy_decisions() -> None:
    jobset = _jobset(numNodes=2)
    (job,) = js.child_jobs(jobset)
    failed = [_done(job, "Failed", reason="BackoffLimitExceeded")]
    decision = js.failure_decision(jobset, failed)
    assert (decision.failed, decision.reason, decision.message) == (
        True,
        "FailedJobs",
        "jobset failed due to one or more job failures (first failed job: tj-node-0)",
    )
    with_restarts = mutate(jobset, "spec.failurePolicy", {"maxRestarts": 1})
    restart = js.failure_decision(with_restarts, failed)
    assert (restart.failed, restart.reason, restart.event_reason, restart.counts_towards_max) == (
        False,
        "DefaultFailurePolicy",
        "RestartJobSetFailurePolicyAction",
        True,
    )
    assert restart.message == "applying RestartJobSet failure policy action (first failed job: tj-node-0)"
    exhausted = mutate(with_restarts, "status", {"restarts": 1, "restartsCountTowardsMax": 1})
    again = mutate(failed[0], "status", failed[0]["status"])
    again["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] = "1"
    assert js.classify(exhausted, failed).previous == failed  # the old attempt's Job is to be deleted
    assert js.classify(exhausted, [again]).failed == [again]
    decision = js.failure_decision(exhausted, [again])
    assert (decision.failed, decision.reason) == (True, "ReachedMaxRestarts")
    assert decision.message == "jobset failed due to reaching max number of restarts (first failed job: tj-node-0)"
    rule = {"name": "oom", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}
    ruled = mutate(with_restarts, "spec.failurePolicy.rules", [rule])
    assert js.failure_decision(ruled, failed).reason == "DefaultFailurePolicy"  # the rule does not match
    matching = [_done(job, "Failed", reason="PodFailurePolicy")]
    decision = js.failure_decision(ruled, matching)
    assert (decision.failed, decision.reason) == (True, "FailJobSetFailurePolicyAction")
    ignore = mutate(ruled, "spec.failurePolicy.rules[0].action", "RestartJobSetAndIgnoreMaxRestarts")
    decision = js.failure_decision(mutate(ignore, "status", {"restartsCountTowardsMax": 5}), matching)
    assert (decision.failed, decision.reason, decision.counts_towards_max) == (False, "FailurePolicy_oom", False)


def test_suspended_jobset_suspends_its_jobs_and_claims_volumes() -> None:
    jobset = mutate(_jobset(numNodes=1), "spec.suspend", True)
    jobset["spec"]["volumeClaimPolicies"] = [{"templates": [{"metadata": {"name": "initializer"}}]}]
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["volumeMounts"] = [{"name": "initializer", "mountPath": "/workspace"}]
    (job,) = js.child_jobs(jobset)
    assert job["spec"]["suspend"] is True
    assert job["spec"]["template"]["spec"]["volumes"] == [
        {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer-tj"}}
    ]
    statuses = js.replicated_jobs_status(jobset, js.classify(jobset, [job]))
    assert statuses[0]["suspended"] == 1


def test_jobs_to_create_follow_depends_on_and_in_order_startup() -> None:
    jobset = _jobset("deepspeed-distributed", numNodes=3)
    first = js.jobs_to_create(jobset, js.ChildJobs(), [])
    assert [j["metadata"]["name"] for j in first.jobs] == ["tj-node-0"]  # the launcher waits for node Ready
    node = first.jobs[0]
    owned = js.classify(jobset, [node])
    assert js.jobs_to_create(jobset, owned, js.replicated_jobs_status(jobset, owned)).jobs == []
    ready = js.classify(jobset, [mutate(node, "status", {"ready": 2, "active": 2})])
    second = js.jobs_to_create(jobset, ready, js.replicated_jobs_status(jobset, ready))
    assert [j["metadata"]["name"] for j in second.jobs] == ["tj-launcher-0"] and second.startup_condition is None

    ordered = mutate(_jobset(numNodes=2), "spec.startupPolicy", {"startupPolicyOrder": "InOrder"})
    ordered["spec"]["replicatedJobs"].append(mutate(ordered["spec"]["replicatedJobs"][0], "name", "eval"))
    step = js.jobs_to_create(ordered, js.ChildJobs(), [])
    assert [j["metadata"]["name"] for j in step.jobs] == ["tj-node-0"]
    assert step.startup_condition == js.STARTUP_IN_PROGRESS
    (created,) = step.jobs
    started = js.classify(ordered, [mutate(created, "status", {"ready": 2, "active": 2})])
    step = js.jobs_to_create(ordered, started, js.replicated_jobs_status(ordered, started))
    assert [j["metadata"]["name"] for j in step.jobs] == ["tj-eval-0"]
    both = js.classify(ordered, [mutate(created, "status", {"ready": 2}), mutate(step.jobs[0], "status", {"ready": 2})])
    done = js.jobs_to_create(ordered, both, js.replicated_jobs_status(ordered, both))
    assert done.jobs == [] and done.startup_condition == js.STARTUP_COMPLETED


def test_blocking_recreate_waits_for_the_old_attempt() -> None:
    jobset = mutate(
        _jobset(numNodes=1), "spec.failurePolicy", {"maxRestarts": 2, "restartStrategy": "BlockingRecreate"}
    )
    jobset["status"] = {"restarts": 1}
    (old,) = js.child_jobs(mutate(jobset, "status", {"restarts": 0}))
    owned = js.classify(jobset, [old])
    assert owned.previous == [old]
    assert js.jobs_to_create(jobset, owned, []).jobs == []
    (fresh,) = js.jobs_to_create(jobset, js.ChildJobs(), []).jobs
    assert fresh["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1"
