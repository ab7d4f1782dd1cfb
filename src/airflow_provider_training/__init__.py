"""Kubeflow training jobs, KitOps ModelKits and deployment for Apache Airflow.

The public surface is small: ``specs`` (load and validate job documents), ``operators``,
``sensors``, ``triggers``, ``hooks`` and the ``airflow-training`` command. Everything under
``embedded`` is the local control plane; its internals are not an API.
"""

from __future__ import annotations

__version__ = "0.1.0"
