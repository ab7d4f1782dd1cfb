"""What the cockpit shows of a job, computed from API objects: only fields a person needs, never a
container's environment (which may hold secrets); Trainer v2's trainerStatus passed through."""

from __future__ import annotations

import json

from airflow_provider_training.ui import views


def _job() -> dict:
    container = {
        "name": "pytorch",
        "image": "ccr.ccs.tencentyun.com/ml/train:1",
        "env": [{"name": "HF_TOKEN", "value": "hf_secret_value"}],
        "envFrom": [{"secretRef": {"name": "registry-credentials"}}],
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
    }
    return {
        "kind": "PyTorchJob",
        "metadata": {"name": "mnist", "namespace": "ml", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "runPolicy": {"backoffLimit": 2, "cleanPodPolicy": "None"},
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": {"spec": {"containers": [container]}},
                },
                "Worker": {
                    "replicas": 3,
                    "restartPolicy": "OnFailure",
                    "template": {"spec": {"containers": [container]}},
                },
            },
        },
        "status": {
            "conditions": [
                {"type": "Created", "status": "True", "reason": "C", "lastTransitionTime": "2026-01-01T00:00:01Z"},
                {"type": "Running", "status": "True", "reason": "R", "lastTransitionTime": "2026-01-01T00:00:02Z"},
            ],
            "trainerStatus": {"progressPercentage": 40, "metrics": [{"name": "loss", "value": "0.3"}]},
        },
    }


def test_job_view_summarises_the_spec_without_environment_and_keeps_trainer_status():
    view = views.job_view(_job())
    assert view["phase"] == "Running" and [c["type"] for c in view["conditions"]] == ["Created", "Running"]
    assert view["spec"]["replicas"] == [
        {
            "type": "Master",
            "replicas": 1,
            "restart_policy": "OnFailure",
            "image": "ccr.ccs.tencentyun.com/ml/train:1",
            "gpus": 2,
        },
        {
            "type": "Worker",
            "replicas": 3,
            "restart_policy": "OnFailure",
            "image": "ccr.ccs.tencentyun.com/ml/train:1",
            "gpus": 2,
        },
    ]
    assert view["spec"]["run_policy"] == {"backoffLimit": 2, "cleanPodPolicy": "None"}
    assert view["trainer_status"]["progressPercentage"] == 40
    text = json.dumps(view)
    assert "hf_secret_value" not in text and "registry-credentials" not in text


def test_replica_view_reports_the_failure_of_a_restarted_container():
    pod = {
        "metadata": {
            "name": "mnist-worker-1",
            "labels": {"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "1"},
        },
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "pytorch", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        },
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "restartCount": 2,
                    "state": {
                        "terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-01-01T00:01:00Z"}
                    },
                }
            ],
        },
    }
    row = views.replica_view(pod, "PyTorchJob")
    assert (row["type"], row["index"], row["restarts"], row["exit_code"], row["exit_reason"]) == (
        "worker",
        1,
        2,
        137,
        "OOMKilled",
    )
    assert row["failed"] and row["node"] == "node-a" and row["gpus"] == 1 and row["finished"] == "2026-01-01T00:01:00Z"
