"""The XCom keys the provider's operators push and its links, cockpit and provenance read — in one
place, so a key renamed or added reaches every reader. The strings are what earlier versions wrote:
DAGs (``ti.xcom_pull(key="reference")``) and rows stored before an upgrade read them unchanged."""

from __future__ import annotations

# Training operators (TrainingJobOperator and the typed ones, TrainJobOperator): pushed before waiting.
JOB_NAME = "job_name"
JOB_NAMESPACE = "job_namespace"
JOB_UID = "job_uid"
JOB_KIND = "job_kind"
JOB_API_URL = "job_api_url"  # for the extra link
JOB_CONN_ID = "job_conn_id"  # for the cockpit: the same connection ("" = the embedded control plane)
JOB_REF = (JOB_KIND, JOB_NAME, JOB_NAMESPACE, JOB_UID)  # the job, as an ObjectRef's fields

# ModelKit operators.
REFERENCE = "reference"
DIGEST = "digest"
SIZE = "size"
SIGNATURE = "signature"
PROVENANCE = "provenance"
MODELKIT = (REFERENCE, DIGEST, SIZE)

# InferenceServiceOperator.
INFERENCE_SERVICE_NAME = "inference_service_name"
INFERENCE_SERVICE_NAMESPACE = "inference_service_namespace"
INFERENCE_SERVICE_UID = "inference_service_uid"
URL = "url"
VERIFIED_DIGEST = "verified_digest"
