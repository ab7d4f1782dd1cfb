"""The Trainer and JobSet admission webhooks' rules and wording (``trainer-v2.md`` §6, §7.6), and a
TrainJob checked against the runtime it references, through the public ``validate`` entry point."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_training.specs.trainer import documents, jobset_webhook, webhook
from airflow_provider_training.specs.trainer.models import TrainingRuntime, TrainJob
from airflow_provider_training.validation import validate
from tests.factories import initializer_job, mutate, runtime, trainjob


def _report(*docs: dict[str, Any]) -> Any:
    """The report of the *last* document, validated together with the ones before it."""
    return validate(list(docs))[-1]


def _errors(*docs: dict[str, Any]) -> list[str]:
    return [str(issue) for issue in _report(*docs).errors]


def _warnings(*docs: dict[str, Any]) -> list[str]:
    return [str(issue) for issue in _report(*docs).warnings]


OWN_RT = {"name": "my-runtime", "kind": "TrainingRuntime"}


def _on_own(job: dict[str, Any]) -> dict[str, Any]:
    return mutate(job, "spec.runtimeRef", OWN_RT)


def test_default_runtime_resolves_from_bundled_defaults() -> None:
    report = _report(trainjob(numNodes=2))
    assert report.ok and report.warnings == [], report.lines()


def test_unsupported_runtime_kind() -> None:
    assert _errors(mutate(trainjob(), "spec.runtimeRef.kind", "Runtime")) == [
        "unsupported runtime: Runtime.trainer.kubeflow.org"
    ]


def test_missing_runtime_is_a_warning_quoting_the_cluster_refusal() -> None:
    report = _report(_on_own(trainjob()))
    assert report.ok
    (warning,) = [str(w) for w in report.warnings]
    assert warning.startswith("spec.runtimeRef: TrainingRuntime 'my-runtime' is neither in this input")
    assert (
        'trainingruntimes.trainer.kubeflow.org "my-runtime" not found: specified trainingRuntime must be created '
        "before the TrainJob is created" in warning
    )


def test_runtime_in_another_namespace_does_not_resolve() -> None:
    other = mutate(runtime(), "metadata.namespace", "elsewhere")
    assert "is neither in this input" in _warnings(other, _on_own(trainjob()))[0]


def test_cluster_runtime_not_found_uses_upstreams_capital_path() -> None:
    job = TrainJob.model_validate(documents.check_document(mutate(trainjob(), "spec.runtimeRef.name", "x")).defaulted)
    (error,), _ = webhook.check_trainjob(job, None)
    assert str(error).startswith("spec.RuntimeRef: Invalid value: {")
    assert str(error).endswith(
        'clustertrainingruntimes.trainer.kubeflow.org "x" not found: specified clusterTrainingRuntime must be '
        "created before the TrainJob is created"
    )


RULES: list[tuple[str, list[dict[str, Any]], str]] = [
    ("torch-reserved-env", [trainjob(env=[{"name": "PET_NNODES", "value": "3"}, {"name": "PET_MASTER_ADDR", "value": "x"},
                                          {"name": "TOKEN", "value": "s3cret"}])],
     'spec.trainer.env: Invalid value: ["PET_NNODES","PET_MASTER_ADDR","TOKEN"]: must not have reserved envs, '
     "invalid envs configured: [PET_MASTER_ADDR PET_NNODES]"),
    ("mpi-reserved-env", [trainjob(runtime_name="deepspeed-distributed",
                                   env=[{"name": "OMPI_MCA_orte_set_default_slots", "value": "2"}])],
     "must not have reserved envs, invalid envs configured: [OMPI_MCA_orte_set_default_slots]"),
    ("xgboost-reserved-env", [trainjob(runtime_name="xgboost-distributed",
                                       env=[{"name": "A", "value": "1"}, {"name": "DMLC_NUM_WORKER", "value": "2"}])],
     "spec.trainer.env[1]: Forbidden: DMLC_NUM_WORKER is reserved for the XGBoost runtime"),
    ("dataset-without-job", [mutate(trainjob(), "spec.initializer", {"dataset": {"storageUri": "hf://d"}})],
     "spec.runtimeRef: Invalid value: {\"name\":\"torch-distributed\",\"apiGroup\":\"trainer.kubeflow.org\","
     "\"kind\":\"ClusterTrainingRuntime\"}: must have dataset-initializer job when trainJob is configured with "
     "input datasetConfig"),
    ("model-without-container", [
        runtime(jobs=[initializer_job("model-initializer", container="other"), runtime()["spec"]["template"]["spec"]["replicatedJobs"][0]]),
        _on_own(mutate(trainjob(), "spec.initializer", {"model": {"storageUri": "hf://m"}}))],
     "must have container with name - model-initializer in the model-initializer job"),
    ("model-without-mount", [
        runtime(jobs=[initializer_job("model-initializer", mount=False), runtime()["spec"]["template"]["spec"]["replicatedJobs"][0]]),
        _on_own(mutate(trainjob(), "spec.initializer", {"model": {"storageUri": "hf://m"}}))],
     "must have volumeMount with name - initializer in container model-initializer of the model-initializer job"),
    ("patch-manager", [mutate(trainjob(), "spec.runtimePatches", [{"manager": "me"}])],
     'spec.runtimePatches.manager: Invalid value: "me": must be a domain-prefixed path (such as "acme.io/foo")'),
    ("patch-unknown-job", [mutate(trainjob(), "spec.runtimePatches", [{"manager": "a.io/b", "trainingRuntimeSpec": {
        "template": {"spec": {"replicatedJobs": [{"name": "worker"}]}}}}])],
     "must not have replicated job that doesn't exist in the runtime job template"),
    ("patch-unknown-container", [mutate(trainjob(), "spec.runtimePatches", [{"manager": "a.io/b", "trainingRuntimeSpec": {
        "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
            "containers": [{"name": "sidecar"}]}}}}}]}}}}])],
     "must not have container that doesn't exist in the runtime job node"),
    ("patch-env-on-node", [mutate(trainjob(), "spec.runtimePatches", [{"manager": "a.io/b", "trainingRuntimeSpec": {
        "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
            "containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]}}}}}]}}}}])],
     "must not have envs for the dataset-initializer, model-initializer, node containers"),
    ("mpi-launcher-as-node-needs-both-jobs", [
        runtime(ml_policy={"mpi": {"runLauncherAsNode": True}}), _on_own(trainjob(numNodes=2))],
     "spec.trainer.numNodes: Invalid value: 2: must have 1 when MPI trainingRuntime with enabled runLauncherAsNode "
     "does not have either launcher and node"),
    ("env-injection-target-missing", [
        runtime(ml_policy={"torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["warmup"]}]}}}),
        _on_own(trainjob())],
     'envInjection target podSet "node" container "warmup" not found in runtime template'),
]  # fmt: skip


@pytest.mark.parametrize(("case", "docs", "expected"), RULES, ids=[r[0] for r in RULES])
def test_trainjob_webhook_rule(case: str, docs: list[dict[str, Any]], expected: str) -> None:
    errors = _errors(*docs)
    assert any(expected in e for e in errors), errors


def test_env_values_never_reach_messages() -> None:
    lines = "\n".join(_report(trainjob(env=[{"name": "PET_NNODES", "value": "hunter2"}])).lines())
    assert "hunter2" not in lines and "PET_NNODES" in lines


def test_deprecated_cluster_runtime_warns() -> None:
    rt = mutate(runtime(kind="ClusterTrainingRuntime"), "metadata.labels", {
        "trainer.kubeflow.org/framework": "torch", "trainer.kubeflow.org/support": "deprecated"})  # fmt: skip
    job = mutate(trainjob(), "spec.runtimeRef.name", "my-runtime")
    assert any('Referenced ClusterTrainingRuntime "my-runtime" is deprecated' in w for w in _warnings(rt, job))
    assert any('ClusterTrainingRuntime "my-runtime" is deprecated and will be removed' in w for w in _warnings(rt))


def _parsed(doc: dict[str, Any]) -> TrainJob:
    return TrainJob.model_validate(documents.check_document(doc).defaulted)


def test_runtime_patches_change_only_around_suspension() -> None:
    rt = TrainingRuntime.model_validate(documents.check_document(runtime()).defaulted)
    old = _parsed(mutate(trainjob(), "spec.runtimePatches", [{"manager": "a.io/b"}]))
    patch = {"manager": "a.io/b", "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"x": "y"}}}}}
    changed = _parsed(mutate(trainjob(), "spec.runtimePatches", [patch]))
    errors, _ = webhook.check_trainjob(changed, rt, old=old)
    assert [str(e) for e in errors] == [
        "spec.runtimePatches: Forbidden: RuntimePatches can only be modified when the TrainJob is suspended before "
        "or after the update"
    ]
    suspended = _parsed(mutate(mutate(trainjob(), "spec.runtimePatches", [patch]), "spec.suspend", True))
    assert webhook.check_trainjob(suspended, rt, old=old)[0] == []
    errors, _ = webhook.check_trainjob(suspended, rt, old=old, active_replicated_jobs=["node"])
    assert [str(e) for e in errors] == [
        "spec.runtimePatches: Forbidden: RuntimePatches cannot be modified when the JobSet's ReplicatedJob node is "
        "still active"
    ]
    same_but_time = _parsed(
        mutate(mutate(trainjob(), "spec.runtimePatches", [{"manager": "a.io/b", "time": "t"}]), "metadata.name", "tj")
    )
    assert webhook.check_trainjob(same_but_time, rt, old=old)[0] == []


def test_runtime_patch_time_defaulting() -> None:
    created = webhook.default_runtime_patch_times(
        mutate(trainjob(), "spec.runtimePatches", [{"manager": "a.io/b"}]), None, "T1"
    )
    assert created["spec"]["runtimePatches"][0]["time"] == "T1"
    unchanged = webhook.default_runtime_patch_times(mutate(created, "spec.suspend", True), created, "T2")
    assert unchanged["spec"]["runtimePatches"][0]["time"] == "T1"
    edited = mutate(created, "spec.runtimePatches[0].trainingRuntimeSpec", {"template": T})
    assert webhook.default_runtime_patch_times(edited, created, "T3")["spec"]["runtimePatches"][0]["time"] == "T3"


RUNTIME_RULES: list[tuple[str, dict[str, Any], str | None]] = [
    ("valid", runtime(), None),
    ("replicas", mutate(runtime(), "spec.template.spec.replicatedJobs[0].replicas", 2),
     "spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: always must be 1"),
    ("no-node-container", mutate(runtime(), "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].name", "main"),
     'spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: Invalid value: ["main"]: must '
     "contain the required container for the ancestor: trainer"),
    ("initializer-container", runtime(jobs=[initializer_job("dataset-initializer", container="x")]),
     "must contain the required container for the ancestor: dataset-initializer"),
    ("skipped-when-disabled", mutate(mutate(runtime(), "spec.template.spec.replicatedJobs[0].replicas", 2),
                                     "metadata.labels", {"trainer.kubeflow.org/webhook-validation": "disabled"}), None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "doc", "expected"), RUNTIME_RULES, ids=[r[0] for r in RUNTIME_RULES])
def test_runtime_webhook_rule(case: str, doc: dict[str, Any], expected: str | None) -> None:
    errors = _errors(doc)
    if expected is None:
        assert errors == []
    else:
        assert any(expected in e for e in errors), errors


def test_training_runtime_is_validated_on_create_only() -> None:
    bad = TrainingRuntime.model_validate(
        documents.check_document(mutate(runtime(), "spec.template.spec.replicatedJobs[0].replicas", 2)).defaulted
    )
    assert webhook.check_runtime(bad, old=bad) == ([], [])
    cluster = bad.model_copy(update={"kind": "ClusterTrainingRuntime"})
    assert webhook.check_runtime(cluster, old=cluster)[0] != []


T: dict[str, Any] = {"spec": {"template": {"spec": {"containers": []}}}}


def _jobset(**spec: Any) -> dict[str, Any]:
    jobs = spec.pop(
        "jobs",
        [
            {
                "name": "node",
                "template": {"spec": {"completions": 2, "parallelism": 2, "template": {"spec": {"containers": []}}}},
            }
        ],
    )
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
            "spec": {"replicatedJobs": jobs, **spec}}  # fmt: skip


JOBSET_RULES: list[tuple[str, dict[str, Any], str | None]] = [
    ("valid", _jobset(), None),
    ("depends-on-first", _jobset(jobs=[{"name": "a", "dependsOn": [{"name": "b", "status": "Ready"}], "template": T}]),
     "DependsOn can't be set for the first ReplicatedJob"),
    ("depends-on-later", _jobset(jobs=[{"name": "a", "template": T},
                                       {"name": "b", "dependsOn": [{"name": "c", "status": "Complete"}], "template": T}]),
     "replicatedJob: b cannot depend on replicatedJob: c"),
    ("success-target", _jobset(successPolicy={"operator": "All", "targetReplicatedJobs": ["x"]}),
     "invalid replicatedJob name 'x' does not appear in .spec.ReplicatedJobs"),
    ("pod-name-too-long", mutate(_jobset(), "metadata.name", "j" * 50),
     "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"),
    ("failure-reason", _jobset(failurePolicy={"maxRestarts": 1, "rules": [{"action": "FailJobSet", "onJobFailureReasons": ["Oops"]}]}),
     "invalid job failure reason 'Oops' in failure policy is not a recognized job failure reason"),
    ("restart-job-gate", _jobset(failurePolicy={"rules": [{"name": "r", "action": "RestartJob"}]}),
     "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed when RestartJob feature "
     "gate is disabled"),
    ("subdomain", _jobset(network={"subdomain": "Bad_Sub"}), "a lowercase RFC 1123 subdomain must consist of"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "doc", "expected"), JOBSET_RULES, ids=[r[0] for r in JOBSET_RULES])
def test_jobset_webhook_rule(case: str, doc: dict[str, Any], expected: str | None) -> None:
    errors = _errors(doc)
    if expected is None:
        assert errors == []
    else:
        assert any(expected in e for e in errors), errors


def test_jobset_defaults() -> None:
    defaulted = jobset_webhook.jobset_defaults(_jobset(failurePolicy={"rules": [{"action": "FailJobSet"}]}))
    spec = defaulted["spec"]
    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert spec["failurePolicy"]["rules"][0]["name"] == "failurePolicyRule0"
    job = spec["replicatedJobs"][0]["template"]["spec"]
    assert job["completionMode"] == "Indexed" and job["template"]["spec"]["restartPolicy"] == "OnFailure"


def test_jobset_update_allows_scheduling_fields_only_while_suspended() -> None:
    old = jobset_webhook.jobset_defaults(_jobset(suspend=True))
    new = mutate(old, "spec.replicatedJobs[0].template.spec.template.spec.nodeSelector", {"pool": "gpu"})
    assert jobset_webhook.check_jobset(new, old) == []
    running = mutate(old, "spec.suspend", False)
    new_running = mutate(running, "spec.replicatedJobs[0].template.spec.template.spec.nodeSelector", {"pool": "gpu"})
    assert [str(i) for i in jobset_webhook.check_jobset(new_running, running)] == [
        'spec.replicatedJobs: Invalid value: "array": field is immutable'
    ]


COMPAT: list[tuple[str, list[dict[str, Any]], str, str]] = [
    ("num-nodes-zero", [trainjob(numNodes=0)], "error", "spec.trainer.numNodes: Invalid value: 0: must be at least 1"),
    ("no-trainer-job", [runtime(jobs=[{"name": "node", "template": {"spec": {"template": {"spec": {
        "containers": [{"name": "node", "image": "x"}]}}}}}]), _on_own(trainjob(numNodes=2))],
     "error", "has no replicatedJob labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer"),
    ("unlabelled-initializer", [runtime(jobs=[initializer_job("dataset-initializer", label=False),
                                              runtime()["spec"]["template"]["spec"]["replicatedJobs"][0]]),
                                _on_own(mutate(trainjob(), "spec.initializer", {"dataset": {"storageUri": "hf://d"}}))],
     "error", "the controller never passes STORAGE_URI or this env to it"),
    ("jobset-name-too-long", [mutate(trainjob(), "metadata.name", "t" * 60)], "error",
     "metadata.name: the JobSet the controller creates for this TrainJob (runtime torch-distributed from the default "
     "ClusterTrainingRuntimes of Kubeflow Trainer v2.3.0) is refused: JobSet name is too long, job names generated"),
    ("no-trainer-on-torch", [trainjob()], "warning", "spec.trainer: not set: the torch plugin injects its environment"),
    ("num-proc-ignored", [trainjob(runtime_name="jax-distributed", numProcPerNode=4)], "warning",
     "spec.trainer.numProcPerNode: ignored by the jax policy"),
    ("sdk-alias", [trainjob(resourcesPerNode={"limits": {"gpu": 1}})], "warning", 'write "nvidia.com/gpu"'),
    ("storage-scheme", [mutate(trainjob(), "spec.initializer", {"model": {"storageUri": "gs://b/m"}}),
                        ], "error", "must have model-initializer job"),
    ("sdk-framework-label", [mutate(runtime(), "metadata.labels", {})], "warning",
     "no trainer.kubeflow.org/framework label: the Kubeflow SDK skips this runtime"),
    ("deprecated-launcher", [trainjob(command=["python", "-m", "torch.distributed.launch", "t.py"])], "warning",
     "spec.trainer.command: python -m torch.distributed.launch is deprecated"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "docs", "level", "expected"), COMPAT, ids=[r[0] for r in COMPAT])
def test_trainjob_against_runtime(case: str, docs: list[dict[str, Any]], level: str, expected: str) -> None:
    found = _errors(*docs) if level == "error" else _warnings(*docs)
    assert any(expected in f for f in found), found


def test_initializer_scheme_lint_on_a_runtime_with_initializers() -> None:
    rt = runtime(
        jobs=[initializer_job("model-initializer"), runtime()["spec"]["template"]["spec"]["replicatedJobs"][0]]
    )
    job = _on_own(mutate(trainjob(), "spec.initializer", {"model": {"storageUri": "gs://b/m"}}))
    report = _report(rt, job)
    assert report.ok, report.lines()
    assert any('"gs://" is not a scheme the upstream model-initializer image reads' in str(w) for w in report.warnings)


def test_env_references_in_the_trainer_command() -> None:
    command = [
        "bash",
        "-c",
        "torchrun --nnodes=$(PET_NNODES) --master_addr=$(MASTER_ADDR) t.py $$(LITERAL) $RANK $JOB_COMPLETION_INDEX",
    ]
    warnings = _warnings(trainjob(command=command))
    assert warnings == [
        "spec.trainer.command[2]: $(MASTER_ADDR) stays literal text at run time: Trainer v2 does not set MASTER_ADDR; "
        "the torch runtime sets $(PET_MASTER_ADDR)",
        "spec.trainer.command[2]: $RANK is empty in the shell: Trainer v2 does not set RANK; the torch runtime sets "
        "$(PET_NODE_RANK)",
    ]
    on_jax = _warnings(trainjob(runtime_name="jax-distributed", command=["python", "t.py", "$(PET_NNODES)"]))
    assert on_jax == [
        "spec.trainer.command[2]: $(PET_NNODES) stays literal text at run time: neither spec.trainer.env, the "
        "runtime nor Trainer v2 defines PET_NNODES"
    ]
    declared = trainjob(command=["python", "t.py", "$(EPOCHS)"], env=[{"name": "EPOCHS", "value": "3"}])
    assert _warnings(declared) == []


def test_metadata_rules_for_runtimes() -> None:
    cluster = mutate(runtime(kind="ClusterTrainingRuntime"), "metadata.namespace", "team")
    report = _report(cluster)
    assert report.ok and [str(w) for w in report.warnings] == [
        'metadata.namespace: "team" is ignored: ClusterTrainingRuntime is cluster-scoped'
    ]
    assert any(
        'metadata.name: Invalid value: "My_Runtime"' in e
        for e in _errors(mutate(runtime(), "metadata.name", "My_Runtime"))
    )


RESOURCES: list[tuple[str, dict[str, Any], str, str]] = [
    ("request-over-limit", {"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}, "error",
     'spec.trainer.resourcesPerNode.requests[cpu]: Invalid value: "4": must be less than or equal to cpu limit of 2'),
    ("gpu-request-only", {"requests": {"nvidia.com/gpu": 1}}, "error",
     "spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]: Required value: Limit must be set for non overcommitable resources"),
    ("gpu-request-differs", {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}, "error",
     'spec.trainer.resourcesPerNode.requests[nvidia.com/gpu]: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2'),
]  # fmt: skip


@pytest.mark.parametrize(("case", "resources", "level", "expected"), RESOURCES, ids=[r[0] for r in RESOURCES])
def test_node_resources_the_pods_would_be_refused_for(
    case: str, resources: dict[str, Any], level: str, expected: str
) -> None:
    assert expected in _errors(trainjob(resourcesPerNode=resources))


def test_runtime_limits_merge_before_the_pod_check() -> None:
    path = "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources"
    rt = mutate(runtime(), path, {"limits": {"cpu": "2"}})
    job = mutate(trainjob(resourcesPerNode={"requests": {"cpu": "3"}}), "spec.runtimeRef", OWN_RT)
    assert any("must be less than or equal to cpu limit of 2" in e for e in _errors(rt, job))
    fine = mutate(trainjob(resourcesPerNode={"requests": {"cpu": "1"}}), "spec.runtimeRef", OWN_RT)
    assert _errors(rt, fine) == []


def test_gpu_lint() -> None:
    gpus = {"limits": {"nvidia.com/gpu": 2}}
    assert any(
        "4 processes per node but 2 GPU(s) per node" in w
        for w in _warnings(trainjob(resourcesPerNode=gpus, numProcPerNode=4))
    )
    assert _warnings(trainjob(resourcesPerNode=gpus, numProcPerNode=2)) == []
    assert any(
        "the XGBoost runtime counts one worker per GPU" in w
        for w in _warnings(trainjob(runtime_name="xgboost-distributed", resourcesPerNode=gpus))
    )


def test_generate_name_is_checked_as_the_name_the_server_generates() -> None:
    job = trainjob(numNodes=2)
    job["metadata"] = {"generateName": "tj-"}
    assert _errors(job) == []
    job["metadata"] = {"generateName": "Tj-"}
    assert _errors(job) == ['Invalid value: "object": metadata.name must match RFC 1035 DNS label format']
    job["metadata"] = {"generateName": "t" * 60}  # cut to 58 + 5 random characters: too long for JobSet's names
    assert any("JobSet name is too long, job names generated" in e for e in _errors(job))


def test_jobset_with_generate_name() -> None:
    doc = _jobset()
    doc["metadata"] = {"generateName": "js-"}
    assert _errors(doc) == []
