"""The training cockpit: an Airflow UI plugin (part of the Airflow layer).

A FastAPI app mounted on Airflow's API server (``/training``) answers read-only questions about
what a task submitted — the job, its replicas, events, logs, learning curves, the ModelKit it
pushed — by reaching the cluster through the same hook and connection the task used, behind
Airflow's own authentication and per-DAG authorization. A bundled React view (``ui/static``)
shows it as task-instance tabs ("Training job", "ModelKit") and a DAG tab ("Training history").
"""
