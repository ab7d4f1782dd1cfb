"""Triggers of the provider (run by the triggerer for deferred tasks)."""

from airflow_provider_training.triggers.training import TrainingJobTrigger

__all__ = ["TrainingJobTrigger"]
