"""The Kubernetes-compatible HTTP API of the embedded control plane (``create_app``)."""

from airflow_provider_training.embedded.apiserver.app import create_app

__all__ = ["create_app"]
