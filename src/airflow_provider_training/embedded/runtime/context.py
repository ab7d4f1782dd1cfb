"""What a controller gets from the daemon: the store, the data directory, a stop signal, informers.

Controllers read and write through the same ``Store`` as the API server (so every change they make
is a normal, watchable write with a new resourceVersion) and learn about changes through
:meth:`ControllerContext.informer`, which yields the current objects as ADDED and then every later
change, the way client-go informers do.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.store import Store, WatchEvent

# Events handed on before the loop serves others: deleting a 1,000-pod job commits a thousand
# events at once, and each informer works its share off in slices.
EVENTS_PER_YIELD = 64


@dataclass
class ControllerContext:
    store: Store
    home: Home
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    async def informer(self, resource: str) -> AsyncIterator[WatchEvent]:
        """Current objects of ``resource`` (a store key such as ``kubeflow.org/pytorchjobs``) as ADDED,
        then every committed change, until the daemon stops."""
        queue: asyncio.Queue[WatchEvent] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def listener(event: WatchEvent) -> None:
            if event.resource == resource:
                loop.call_soon_threadsafe(queue.put_nowait, event)

        unsubscribe = self.store.subscribe(listener)
        try:
            listed = self.store.list(resource)
            for obj in listed.items:
                meta = obj["metadata"]
                yield WatchEvent(
                    "ADDED",
                    resource,
                    meta.get("namespace", ""),
                    meta["name"],
                    int(meta["resourceVersion"]),
                    obj,
                )
            last = listed.resource_version
            handed = 0
            while not self.stopping.is_set():
                if queue.empty() or handed >= EVENTS_PER_YIELD:
                    handed = 0
                    await asyncio.sleep(0)  # (a full queue never suspends ``get``: a burst held the loop)
                event = await queue.get()
                handed += 1
                if event.rv > last:
                    last = event.rv
                    yield event
        finally:
            unsubscribe()
