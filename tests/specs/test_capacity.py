"""How many pods an object asks to run at once (``specs/capacity.py``): what the embedded
control plane's cap on one job counts, per kind, and the field it names."""

from __future__ import annotations

import pytest

from airflow_provider_training.specs.capacity import ENV, max_pods_per_job, pod_count, too_many_pods


def _container() -> dict[str, object]:
    return {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}


@pytest.mark.parametrize(
    ("obj", "pods", "path"),
    [
        (
            {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "spec": {"trainer": {"numNodes": 8}}},
            8,
            "spec.trainer.numNodes",
        ),
        ({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "spec": {}}, 1, "spec.trainer.numNodes"),
        (
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "ClusterTrainingRuntime",
                "spec": {"mlPolicy": {"numNodes": 3}},
            },
            3,
            "spec.mlPolicy.numNodes",
        ),
        (
            {"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": 40, "completions": 5}},
            5,
            "spec.parallelism",
        ),
        ({"apiVersion": "batch/v1", "kind": "Job", "spec": {}}, 1, "spec.parallelism"),
        (
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "spec": {
                    "replicatedJobs": [
                        {"name": "a", "replicas": 2, "template": {"spec": {"parallelism": 50}}},
                        {"name": "b", "replicas": 3},
                    ]
                },
            },
            103,
            "spec.replicatedJobs[0].template.spec.parallelism",
        ),
        (
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, **_container()}, "Worker": {"replicas": 6}}},
            },
            7,
            "spec.pytorchReplicaSpecs[Worker].replicas",
        ),
    ],
)
def test_pods_at_once_per_kind(obj: dict[str, object], pods: int, path: str) -> None:
    count = pod_count(obj)
    assert count is not None and (count.pods, count.path) == (pods, path)


def test_a_trainjob_without_num_nodes_counts_its_runtimes() -> None:
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "spec": {"runtimeRef": {"name": "r"}}}
    issue = too_many_pods(job, runtime_num_nodes=5000)
    assert issue is not None and issue.path == "spec.runtimeRef"
    assert "(from its runtime's spec.mlPolicy.numNodes)" in issue.message


def test_other_kinds_and_hostile_counts_are_not_counted() -> None:
    assert pod_count({"apiVersion": "v1", "kind": "Pod"}) is None
    # what the schema refuses (a string, a negative count) is the schema's finding, not this one
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": "many", "completions": -5}}
    assert too_many_pods(job) is None


def test_the_limit_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "spec": {"trainer": {"numNodes": 1001}}}
    assert max_pods_per_job() == 1000
    issue = too_many_pods(job)
    assert issue is not None and issue.level == "provider"
    assert issue.message.startswith("Invalid value: 1001: this TrainJob would run 1001 pods at once")
    assert ENV in issue.message
    monkeypatch.setenv(ENV, "5000")
    assert too_many_pods(job) is None
    for broken in ("0", "-3", "lots"):
        monkeypatch.setenv(ENV, broken)
        assert max_pods_per_job() == 1000
