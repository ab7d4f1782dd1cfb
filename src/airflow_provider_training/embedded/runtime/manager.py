"""The controllers the daemon runs, each restarted after a crash (a controller-runtime Manager). The
daemon passes them in (``embedded/controllers``: ``CONTROLLERS``, and the node agent); nothing registers
itself here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from airflow_provider_training.embedded.runtime.context import ControllerContext

log = logging.getLogger(__name__)


class Controller(Protocol):
    name: str

    async def run(self, ctx: ControllerContext) -> None:
        """Reconcile until ``ctx.stopping`` is set; exceptions are logged and the controller restarted."""


ControllerFactory = Callable[[], Controller]


async def _supervise(controller: Controller, ctx: ControllerContext, restart_delay: float) -> None:
    while not ctx.stopping.is_set():
        try:
            await controller.run(ctx)
            return
        except asyncio.CancelledError:
            raise
        except Exception:  # a crashed controller is restarted, as a Manager restarts a failed runnable
            log.exception("controller %s failed; restarting in %.1fs", controller.name, restart_delay)
            await asyncio.sleep(restart_delay)


def run_controllers(
    ctx: ControllerContext, factories: Sequence[ControllerFactory], restart_delay: float = 1.0
) -> list[asyncio.Task[None]]:
    return [
        asyncio.create_task(_supervise(factory(), ctx, restart_delay), name=f"controller:{i}")
        for i, factory in enumerate(factories)
    ]
