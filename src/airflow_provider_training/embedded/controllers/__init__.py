"""Controllers that run inside the daemon: training jobs, batch/v1 Jobs, InferenceServices, the
Events' time to live, Kubeflow Trainer v2 (TrainJob, JobSet, Indexed Jobs), ClusterRole aggregation
and the namespaces' default service accounts.

``CONTROLLERS`` lists them; the daemon (``embedded/server.py``) passes that list and the node agent,
which is no controller of this package, to the controller runtime's manager (``embedded/runtime``),
which builds each with a ``ControllerContext`` and runs ``run()`` as an asyncio task on the API
server's event loop. A new controller is one more entry here.
"""

from airflow_provider_training.embedded.controllers.batchjobs import BatchJobController
from airflow_provider_training.embedded.controllers.clusterroleaggregation import ClusterRoleAggregation
from airflow_provider_training.embedded.controllers.eventttl import EventTTL
from airflow_provider_training.embedded.controllers.indexedjobs import IndexedJobController
from airflow_provider_training.embedded.controllers.inferenceservice import InferenceServiceController
from airflow_provider_training.embedded.controllers.jobs import JobController
from airflow_provider_training.embedded.controllers.jobset import JobSetController
from airflow_provider_training.embedded.controllers.serviceaccounts import ServiceAccountsController
from airflow_provider_training.embedded.controllers.trainjob import TrainJobController
from airflow_provider_training.embedded.runtime import ControllerFactory

CONTROLLERS: tuple[ControllerFactory, ...] = (
    JobController,
    BatchJobController,
    InferenceServiceController,
    EventTTL,  # Events expire, as with kube-apiserver's --event-ttl
    # Kubeflow Trainer v2: TrainJob → JobSet → Indexed Jobs → Pods.
    TrainJobController,
    JobSetController,
    IndexedJobController,
    # Authorization's: ClusterRole aggregation, and a default service account in every namespace.
    ClusterRoleAggregation,
    ServiceAccountsController,
)

__all__ = ["CONTROLLERS"]
