"""Request work off the event loop.

The event loop serves every client and runs the controllers, so no request may hold it for long.
A request's I/O (reading its body, writing its response) stays on the loop; everything between —
decoding and checking the body, admission, managed fields, the store's reads and writes, encoding
the answer — runs on a worker thread. Python switches threads every few milliseconds, so a
request that takes seconds of CPU (a ConfigMap of 150,000 keys) no longer stops the others.

The store serialises its writes under its own lock and hands out resourceVersions in commit order,
so requests on several threads keep the one global order of writes. What the threads change is
interleaving: a read-modify-write may now meet a write that landed between its read and its write.
Writes carry the resourceVersion they read (a Conflict is retried where kube-apiserver retries it,
for patches and applies), and the controllers write the objects they read the same way.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
# Threads share one interpreter lock: more workers only let more requests wait their turn at once,
# so that one slow request never queues the quick ones behind it.
WORKERS = 8
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="apiserver")
    return _pool


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a worker thread; its exceptions are raised here."""
    return await asyncio.get_running_loop().run_in_executor(_executor(), functools.partial(fn, *args, **kwargs))
