"""Operator extra links."""
