"""Run by ``test_kubeflow_sdk.py`` in a venv with the Kubeflow SDK (``kubeflow``, its own
``kubernetes`` client): list the runtimes, train a function on 2 nodes, wait, read node-0's log,
delete — as a user does against a cluster. Prints one JSON report.

    python sdk_probe.py KUBECONFIG NAMESPACE WORKDIR

The SDK writes the function's script to the container's working directory; on the embedded node
that is the working-directory annotation (WORKDIR), so nothing lands in the caller's folder.
"""

import json
import sys


def train() -> None:
    import os

    import torch.distributed as dist

    dist.init_process_group("gloo")
    t = __import__("torch").tensor([dist.get_rank() + 1.0])
    dist.all_reduce(t)
    print(f"sdk rank {dist.get_rank()} of {dist.get_world_size()} node {os.environ['PET_NODE_RANK']} sum {t.item()}")
    dist.destroy_process_group()


def main() -> None:
    from kubeflow.trainer import CustomTrainer, KubernetesBackendConfig, TrainerClient
    from kubeflow.trainer.options import Annotations

    kubeconfig, namespace, workdir = sys.argv[1], sys.argv[2], sys.argv[3]
    trainer = TrainerClient(KubernetesBackendConfig(namespace=namespace, config_file=kubeconfig))
    report: dict = {"runtimes": sorted(r.name for r in trainer.list_runtimes())}
    runtime = trainer.get_runtime("torch-distributed")
    name = trainer.train(
        runtime=runtime,
        trainer=CustomTrainer(func=train, num_nodes=2, resources_per_node={"cpu": 1}),
        options=[Annotations({"training.airflow.apache.org/working-dir": workdir})],
    )
    job = trainer.wait_for_job_status(name, timeout=300, polling_interval=1)
    report.update(name=name, status=job.status, num_nodes=job.num_nodes, steps=sorted(s.name for s in job.steps))
    report["logs"] = list(trainer.get_job_logs(name))
    report["listed"] = [j.name for j in trainer.list_jobs()]
    trainer.delete_job(name)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
