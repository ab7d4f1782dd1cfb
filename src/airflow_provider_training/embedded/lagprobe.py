"""An optional probe of the daemon's event-loop lag, for benchmarks and diagnosis.

``AIRFLOW_TRAINING_LAG_PROBE=<file>``: a task wakes every 10 ms and appends to ``<file>`` how late
each wake-up was (one line per sample: ``<monotonic seconds> <lag ms>``, written every half
second). Lag measured inside the daemon is what every client and controller waits on, whatever
the clients or the network add. ``AIRFLOW_TRAINING_LAG_STACKS=<ms>`` also logs, from a thread,
every thread's stack whenever it has not come round for that long (what held it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import traceback
from pathlib import Path

log = logging.getLogger(__name__)
INTERVAL = 0.01
FLUSH_EVERY = 0.5


def start() -> asyncio.Task[None] | None:
    """Start the probe on the running loop when the environment asks for it."""
    target = os.environ.get("AIRFLOW_TRAINING_LAG_PROBE")
    stacks = os.environ.get("AIRFLOW_TRAINING_LAG_STACKS")
    if not target and not stacks:
        return None
    beat = [time.monotonic()]
    if stacks:
        _watch(beat, float(stacks) / 1000, threading.get_ident())
    return asyncio.create_task(_probe(Path(target) if target else None, beat), name="lag-probe")


async def _probe(path: Path | None, beat: list[float]) -> None:
    pending: list[str] = []
    flushed = time.monotonic()
    while True:
        before = time.monotonic()
        await asyncio.sleep(INTERVAL)
        now = time.monotonic()
        beat[0] = now
        pending.append(f"{now:.4f} {max(0.0, (now - before - INTERVAL) * 1000):.2f}\n")
        if path is not None and now - flushed >= FLUSH_EVERY:
            with path.open("a") as out:
                out.writelines(pending)
            pending.clear()
            flushed = now


def _watch(beat: list[float], threshold: float, loop_thread: int) -> None:
    def run() -> None:
        reported = 0.0
        while True:
            time.sleep(threshold / 4)
            late = time.monotonic() - beat[0]
            if late > threshold and beat[0] != reported:
                reported = beat[0]
                names = {t.ident: t.name for t in threading.enumerate()}
                stacks = [
                    f"thread {names.get(ident, ident)}{' (the event loop)' if ident == loop_thread else ''}:\n"
                    + "".join(traceback.format_stack(frame)[-6:])
                    for ident, frame in sys._current_frames().items()
                    if ident != threading.get_ident()
                ]
                log.warning("the event loop has not come round for %.0f ms; threads:\n%s", late * 1000, "".join(stacks))

    threading.Thread(target=run, name="lag-stacks", daemon=True).start()
