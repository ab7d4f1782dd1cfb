"""Annotations and labels this project puts on objects, shared by the operators, the controllers and
the node agent (so none of them imports another for a name)."""

from __future__ import annotations

#: On a job (and copied to its pods): the directory the job was submitted from, where the embedded
#: node runs the replicas' commands when the image maps to no other directory.
WORKING_DIR_ANNOTATION = "training.airflow.apache.org/working-dir"

#: batch/v1 Job labels the API server generates (``pkg/apis/batch``) and the Job controller selects by.
BATCH_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
BATCH_JOB_NAME = "batch.kubernetes.io/job-name"
BATCH_LEGACY_CONTROLLER_UID = "controller-uid"
BATCH_LEGACY_JOB_NAME = "job-name"
