"""The operator tests reuse the Airflow-level fixtures of ``tests/operators`` (the embedded control
plane as the default cluster, ``run_dag``)."""

from tests.operators.conftest import embedded_default, run_dag

__all__ = ["embedded_default", "run_dag"]
