"""The store's WAL checkpoints, on a thread of their own.

SQLite checkpoints a WAL database from inside the COMMIT that takes the log past 1,000 pages: that
commit copies the log into the database file and syncs both, 40-60 ms here and more on a busy disk,
and the store's writers include the event loop (the controllers and the node agent write pods in
batches). So the store turns automatic checkpoints off and this thread runs them, on its own
connection: a passive checkpoint, which never waits for or blocks a writer or a reader, once the
writes since the last one reach ``AFTER_BYTES``, or ``EVERY`` seconds after a write. The sqlite3
module lets go of the interpreter while SQLite works, so the loop runs meanwhile.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import weakref
from pathlib import Path

EVERY = 1.0  # seconds
AFTER_BYTES = 4 << 20  # about SQLite's own 1,000 pages of 4 KB
WAL_SIZE_LIMIT = 64 << 20  # the WAL file is cut back to this once a checkpoint let it start over


class Checkpointer:
    def __init__(self, path: Path) -> None:
        self.pending = 0  # bytes written since the last checkpoint (an estimate: the rows' bodies)
        self._wake = threading.Event()
        self._stopped = threading.Event()
        # The thread holds the checkpointer weakly: a store dropped without ``close`` ends it too.
        self._thread = threading.Thread(
            target=_run, args=(path, weakref.ref(self), self._wake, self._stopped), name="store-checkpoint", daemon=True
        )
        self._thread.start()

    def wrote(self, nbytes: int) -> None:
        self.pending += nbytes
        if self.pending >= AFTER_BYTES:
            self._wake.set()

    def close(self) -> None:
        self._stopped.set()
        self._wake.set()
        self._thread.join(timeout=30)


def _run(path: Path, ref: weakref.ref[Checkpointer], wake: threading.Event, stopped: threading.Event) -> None:
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA busy_timeout=5000")
        while True:
            wake.wait(EVERY)
            wake.clear()
            owner = ref()
            if owner is None or stopped.is_set():
                return
            if owner.pending == 0:
                continue
            owner.pending = 0
            del owner
            with contextlib.suppress(sqlite3.Error):  # (a failed one is tried again after the next write)
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    finally:
        conn.close()
