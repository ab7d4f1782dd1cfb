"""Sensors of the provider."""

from airflow_provider_training.sensors.training import TrainingJobSensor

__all__ = ["TrainingJobSensor"]
