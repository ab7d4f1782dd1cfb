"""Hold a trigger's event until a few seconds after its task deferred.

Airflow (3.2 to 3.4.0b2) can fail a deferred task whose trigger fires before the scheduler has
processed the deferring worker's exit ("finished with state success, but the task instance's state
attribute is queued"; apache/airflow#66374, #67287, #72716). A job or rollout that ends within
seconds of the deferral hits that window; holding the event until ``[training]
defer_settle_seconds`` after the deferral closes it. Anything that takes longer is not delayed at
all. The default is per Airflow version (:func:`compat.default_settle_seconds`: 10 until a release
tolerates every variant of the race, then 0).

``not_before`` is wall-clock, fixed when the worker creates the trigger and serialized with it, so
a trigger that moves to another triggerer keeps it.
"""

from __future__ import annotations

import asyncio
import time

from airflow_provider_training import compat


def settle_seconds() -> float:
    from airflow.sdk import conf

    return max(0.0, conf.getfloat("training", "defer_settle_seconds", fallback=compat.default_settle_seconds()))


def not_before(given: float | None) -> float:
    """``given`` (a deserialized trigger), else now plus the configured settle time (a new one)."""
    return given if given is not None else time.time() + settle_seconds()


async def settle(until: float) -> None:
    delay = until - time.time()
    if delay > 0:
        await asyncio.sleep(delay)
