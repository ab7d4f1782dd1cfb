"""Where the controllers' extension point used to live; it is the controller runtime now
(``embedded/runtime``), re-exported here for code written against the old place."""

from airflow_provider_training.embedded.runtime import (
    CONTROLLERS,
    Controller,
    ControllerContext,
    ControllerFactory,
    WorkQueue,
    run_controllers,
)

__all__ = ["CONTROLLERS", "Controller", "ControllerContext", "ControllerFactory", "WorkQueue", "run_controllers"]
