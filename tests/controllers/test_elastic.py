"""An elastic PyTorchJob (workers only, ``elasticPolicy`` with c10d) whose replicas run the
project's ``train.py`` under real ``torchrun``, meeting at the rendezvous the operator names in
``PET_RDZV_ENDPOINT`` (worker-0's address and an allocated port)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.controllers.jobs import Jobs, conditions
from tests.factories import job_document as job
from tests.requires import requires

pytestmark = requires("torch")
TRAIN = Path(__file__).resolve().parents[2] / "dags" / "code" / "train.py"


def test_elastic_workers_meet_at_the_c10d_rendezvous_and_train(
    kube_api: Any, test_namespace: str, tmp_path: Path
) -> None:
    jobs = Jobs(kube_api, test_namespace)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--rdzv_backend=c10d",
        "--rdzv_endpoint=$(PET_RDZV_ENDPOINT)",
        "--nnodes=$(PET_NNODES)",
        "--nproc_per_node=1",
        str(TRAIN),
        "--epochs=2",
        f"--output={tmp_path}",
    ]
    worker = {"name": "pytorch", "image": "pytorch/pytorch:2.1.0-cuda11.8-cudnn8-runtime", "command": command}
    jobs.create(
        job(
            "PyTorchJob",
            "elastic",
            {"Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [worker]}}}},
            elasticPolicy={"minReplicas": 2, "maxReplicas": 2, "rdzvBackend": "c10d", "maxRestarts": 3},
        )
    )
    done = jobs.wait("PyTorchJob", "elastic", "Succeeded", timeout=180)
    assert conditions(done)[-1] == (
        "Succeeded",
        "True",
        "PyTorchJobSucceeded",
        f"PyTorchJob {test_namespace}/elastic successfully completed.",  # no Master: upstream's wording
    )
    pods = {p.metadata.name: p for p in jobs.pods("elastic")}
    assert sorted(pods) == ["elastic-worker-0", "elastic-worker-1"]
    env = {e.name: e.value for e in pods["elastic-worker-1"].spec.containers[0].env}
    host, port = env["PET_RDZV_ENDPOINT"].rsplit(":", 1)
    assert host == pods["elastic-worker-0"].status.pod_ip and port.isdigit()
    assert (env["PET_RDZV_BACKEND"], env["PET_NNODES"], env["PET_MAX_RESTARTS"]) == ("c10d", "2:2", "3")
    # Both launchers joined one rendezvous: one world of 2, ranks 0 and 1 across the two pods.
    started = sorted(
        line.split(":")[0]
        for name in pods
        for line in jobs.logs(name).splitlines()
        if line.startswith("rank ") and "starting" in line
    )
    assert started == ["rank 0/2", "rank 1/2"]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and (tmp_path / "model.pt").stat().st_size > 0
