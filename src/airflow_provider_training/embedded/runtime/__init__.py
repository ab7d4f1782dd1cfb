"""The controller runtime of the embedded control plane (what controller-runtime is to a cluster).

- ``context.py``: :class:`ControllerContext` (store, home, stopping) and its informer.
- ``queue.py``: :class:`WorkQueue`, de-duplicating keys, with delayed re-adds and per-key back-off.
- ``controller.py``: a controller *declares* what it reconciles (``For``), what it owns (``Owns``, by
  ownerReference or by label) and what else it watches (``Watches``); ``reconcile(key)`` returns an
  optional requeue delay; :func:`run` drives it (one queue, conflicts requeued at once, errors
  retried with back-off, bursts of events coalesced into one pass).
- ``manager.py``: the supervision of the controllers the daemon passes in.
- ``owning.py``: :class:`OwnerController`, the skeleton of the controllers of objects that own
  others (batch and Indexed Jobs, JobSets, TrainJobs): queue, ``managedBy``, children read in slices.
- ``batches.py``: creating and deleting many children of one object in slow-start batches that
  yield the event loop (``controller.SlowStartBatch``), at most ``MAX_PER_PASS`` per pass.

It depends on ``store`` / ``paths`` only, so the controllers and the node agent can both build on it
without importing each other.
"""

from airflow_provider_training.embedded.runtime.batches import (
    MAX_PER_PASS,
    list_in_slices,
    per_pass,
    slow_start_batch,
)
from airflow_provider_training.embedded.runtime.context import ControllerContext
from airflow_provider_training.embedded.runtime.controller import For, Owns, OwnWrites, Reconciler, Watches, run
from airflow_provider_training.embedded.runtime.manager import Controller, ControllerFactory, run_controllers
from airflow_provider_training.embedded.runtime.owning import OwnerController, controlled_in_slices
from airflow_provider_training.embedded.runtime.queue import WorkQueue

__all__ = [
    "MAX_PER_PASS",
    "Controller",
    "ControllerContext",
    "ControllerFactory",
    "For",
    "OwnWrites",
    "OwnerController",
    "Owns",
    "Reconciler",
    "Watches",
    "WorkQueue",
    "controlled_in_slices",
    "list_in_slices",
    "per_pass",
    "run",
    "run_controllers",
    "slow_start_batch",
]
