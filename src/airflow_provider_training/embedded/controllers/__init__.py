"""Controllers that run inside the daemon: training jobs, batch/v1 Jobs, InferenceServices, the
Events' time to live, ClusterRole aggregation and the namespaces' default service accounts.

A controller is registered by appending a factory to ``CONTROLLERS``; the daemon builds each (and
the node agent, which is no controller of this package) with a ``ControllerContext`` and runs
``run()`` as an asyncio task on the API server's event loop (``embedded/runtime``).
"""

from airflow_provider_training.embedded.controllers.base import (
    CONTROLLERS,
    Controller,
    ControllerContext,
    ControllerFactory,
    run_controllers,
)
from airflow_provider_training.embedded.controllers.batchjobs import BatchJobController
from airflow_provider_training.embedded.controllers.clusterroleaggregation import ClusterRoleAggregation
from airflow_provider_training.embedded.controllers.eventttl import EventTTL
from airflow_provider_training.embedded.controllers.indexedjobs import IndexedJobController
from airflow_provider_training.embedded.controllers.inferenceservice import InferenceServiceController
from airflow_provider_training.embedded.controllers.jobs import JobController
from airflow_provider_training.embedded.controllers.jobset import JobSetController
from airflow_provider_training.embedded.controllers.serviceaccounts import ServiceAccountsController
from airflow_provider_training.embedded.controllers.trainjob import TrainJobController

CONTROLLERS.extend([JobController, BatchJobController, InferenceServiceController])
CONTROLLERS.append(EventTTL)  # Events expire, as with kube-apiserver's --event-ttl
# Kubeflow Trainer v2: TrainJob → JobSet → Indexed Jobs → Pods.
CONTROLLERS.extend([TrainJobController, JobSetController, IndexedJobController])
# Authorization's: ClusterRole aggregation, and a default service account in every namespace.
CONTROLLERS.extend([ClusterRoleAggregation, ServiceAccountsController])

__all__ = ["CONTROLLERS", "Controller", "ControllerContext", "ControllerFactory", "run_controllers"]
