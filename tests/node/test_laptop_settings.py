"""Node settings for machines without what a cluster has (a laptop): the relaxed GPU policy and
the ``links`` fallback for mount paths (macOS, or kernels that refuse namespaces). One daemon with
``AIRFLOW_TRAINING_GPUS=0,1``, ``AIRFLOW_TRAINING_GPU_POLICY=relaxed`` and
``AIRFLOW_TRAINING_ISOLATION=links``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from airflow_provider_training.embedded import ControlPlane, start, stop
from tests.controllers.jobs import Jobs
from tests.factories import job_document as job
from tests.factories import replica
from tests.fixtures.control_plane import FAST_SETTINGS
from tests.waiting import wait_for

LAPTOP = {
    **FAST_SETTINGS,
    "AIRFLOW_TRAINING_GPUS": "0,1",
    "AIRFLOW_TRAINING_GPU_POLICY": "relaxed",
    "AIRFLOW_TRAINING_ISOLATION": "links",
}


@pytest.fixture(scope="module")
def laptop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    home = tmp_path_factory.mktemp("laptop")
    plane = start(home, env=LAPTOP)
    yield plane
    stop(home, replicas=True)


@pytest.fixture
def jobs(laptop: ControlPlane) -> Iterator[Jobs]:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(laptop.kubeconfig), client_configuration=configuration)
    api = client.ApiClient(configuration)
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    yield Jobs(api, namespace)
    api.close()


def test_relaxed_gpu_policy_starts_with_the_gpus_that_are_free(jobs: Jobs) -> None:
    code = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"
    greedy = {"resources": {"limits": {"nvidia.com/gpu": 3}}}
    jobs.create(job("PyTorchJob", "greedy", {"Master": replica(code, container=greedy)}))
    jobs.wait("PyTorchJob", "greedy", "Succeeded")
    assert jobs.logs("greedy-master-0").strip() == "0,1"  # both GPUs there are, not 3, and no Pending
    warnings = [(e.type, e.reason, e.message) for e in jobs.events("greedy-master-0") if e.type == "Warning"]
    assert (
        "Warning",
        "Overcommitted",
        "3 nvidia.com/gpu requested but 2 free on this machine; started anyway (AIRFLOW_TRAINING_GPU_POLICY=relaxed)",
    ) in warnings
    assert "FailedScheduling" not in [e.reason for e in jobs.events("greedy-master-0")]


def test_links_fallback_reaches_volumes_and_reports_what_it_cannot_mount(
    jobs: Jobs, laptop: ControlPlane, tmp_path: Path
) -> None:
    mount_path = Path("/tmp") / f"links-{uuid.uuid4().hex[:8]}" / "output"  # not on the host yet
    existing = tmp_path / "taken"
    existing.mkdir()
    code = (
        f"import json; open({str(mount_path / 'result.json')!r}, 'w').write(json.dumps({{'ok': True}})); "
        f"print(sorted(__import__('os').listdir({str(existing)!r})))"
    )
    pod = {
        "volumes": [
            {"name": "out", "persistentVolumeClaim": {"claimName": "results"}},
            {"name": "scratch", "emptyDir": {}},
        ],
        "container": {
            "volumeMounts": [
                {"name": "out", "mountPath": str(mount_path)},
                {"name": "scratch", "mountPath": str(existing)},
            ]
        },
    }
    jobs.create(job("PyTorchJob", "linked", {"Master": replica(code, restart="Never", **pod)}))
    jobs.wait("PyTorchJob", "linked", "Succeeded")
    claim = laptop.home / "volumes" / "pvc" / jobs.namespace / "results"
    assert json.loads((claim / "result.json").read_text()) == {"ok": True}  # written through the link
    assert mount_path.is_symlink() and mount_path.resolve() == claim.resolve()
    assert jobs.logs("linked-master-0").strip() == "[]"  # the host directory, untouched
    failed = wait_for(
        lambda: [e.message for e in jobs.events("linked-master-0") if e.reason == "FailedMount"], 5, "FailedMount"
    )
    assert len(failed) == 1 and failed[0].startswith(f"{existing} exists on the host, so the volume at ")
    # an emptyDir is on disk under node/emptydir/<pod uid>/ (the pod's runtime directory may be in memory)
    uid = jobs.core.read_namespaced_pod("linked-master-0", jobs.namespace).metadata.uid
    assert failed[0].endswith(f"/node/emptydir/{uid}/scratch cannot be linked there")
    mount_path.unlink()
    mount_path.parent.rmdir()
