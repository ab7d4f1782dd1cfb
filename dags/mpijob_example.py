"""MPIJob example: a launcher runs ``mpirun`` over two workers (mpi4py + Open MPI).

The launcher's ``mpirun`` reaches the workers through the hostfile the operator mounts at
``/etc/mpi`` (on the embedded control plane the node agent delivers the ``kubectl exec`` it uses);
each worker runs ``code/mpi_train.py``, which averages gradients with ``Allreduce``.
"""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_provider_training.operators import MPIJobOperator
from airflow_provider_training.operators.naming import MACROS

IMAGE = "ccr.ccs.tencentyun.com/ml-models/digits-mpi:latest"

with DAG(
    dag_id="mpijob_example",
    schedule=None,
    catchup=False,
    tags=["example", "mpijob"],
    doc_md=__doc__,
    user_defined_macros=MACROS,
):
    MPIJobOperator(
        task_id="train",
        job={
            "apiVersion": "kubeflow.org/v1",
            "kind": "MPIJob",
            "metadata": {"name": "{{ run_name('mpi-digits') }}"},
            "spec": {
                "slotsPerWorker": 1,
                "mpiReplicaSpecs": {
                    "Launcher": {
                        "replicas": 1,
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "mpi-launcher",
                                        "image": IMAGE,
                                        "command": ["mpirun", "-np", "2", "python", "code/mpi_train.py"],
                                        "args": ["--output=/tmp/mpi-digits"],
                                    }
                                ]
                            }
                        },
                    },
                    "Worker": {
                        "replicas": 2,
                        "template": {"spec": {"containers": [{"name": "mpi-worker", "image": IMAGE}]}},
                    },
                },
            },
        },
    )
