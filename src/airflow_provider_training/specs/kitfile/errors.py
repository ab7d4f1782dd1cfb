"""The one error a Kitfile raises."""

from __future__ import annotations


class KitfileError(ValueError):
    """A Kitfile that kit would refuse; the message names the field and how to fix it."""
