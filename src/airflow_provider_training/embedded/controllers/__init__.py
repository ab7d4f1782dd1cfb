"""Controllers that run inside the daemon (the training-job controller, the batch/v1 Job controller and the node agent).

A controller is registered by appending a factory to ``CONTROLLERS``; the daemon builds each with a
``ControllerContext`` and runs ``run()`` as an asyncio task on the API server's event loop.
"""

from airflow_provider_training.embedded.controllers.base import (
    CONTROLLERS,
    Controller,
    ControllerContext,
    ControllerFactory,
    run_controllers,
)
from airflow_provider_training.embedded.controllers.batchjobs import BatchJobController
from airflow_provider_training.embedded.controllers.jobs import JobController
from airflow_provider_training.embedded.node.agent import NodeAgent

CONTROLLERS.extend([JobController, BatchJobController, NodeAgent])

__all__ = ["CONTROLLERS", "Controller", "ControllerContext", "ControllerFactory", "run_controllers"]
