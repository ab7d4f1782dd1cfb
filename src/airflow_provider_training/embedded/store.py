"""The control plane's durable object store: SQLite in WAL mode, one global resourceVersion.

Every write is one transaction that stores the object, its label and owner index rows and an entry
in the event log, and bumps the global counter, so a write the API acknowledged survives ``kill -9``
(WAL with ``synchronous=NORMAL`` loses nothing when only the process dies; ``durable=True`` also
survives power loss). Watches replay the event log from a resourceVersion and then follow the
in-process listeners, which the store calls after each commit.
"""

from __future__ import annotations

import builtins
import contextlib
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded import jsoncodec
from airflow_provider_training.embedded.checkpointer import WAL_SIZE_LIMIT, Checkpointer
from airflow_provider_training.specs.refs import ObjectRef
from airflow_provider_training.specs.unstructured import ObjectMeta, Unstructured, controlled_by, owner_references

SCHEMA_VERSION = 1

# Migrations from version N to N+1, run in one transaction when an older store is opened.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {}

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS objects (
    resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    uid TEXT NOT NULL, rv INTEGER NOT NULL, labels TEXT NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (resource, namespace, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS labels (
    resource TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    namespace TEXT NOT NULL, name TEXT NOT NULL,
    PRIMARY KEY (resource, key, value, namespace, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS owners (
    owner_uid TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    PRIMARY KEY (owner_uid, resource, namespace, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    rv INTEGER PRIMARY KEY, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    type TEXT NOT NULL, body TEXT NOT NULL);
"""
# Every write replaces its object's label and owner rows: without these, finding them scanned every
# row of the resource (labels) or of the whole table (owners), so writes slowed as the store grew.
# Additive (a store with them still opens with an older provider), so created on open, not migrated.
_INDEXES = """
CREATE INDEX IF NOT EXISTS labels_by_object ON labels (resource, namespace, name);
CREATE INDEX IF NOT EXISTS owners_by_object ON owners (resource, namespace, name);
"""


class StoreError(Exception):
    """Base of the store's errors; the API server maps each to a Kubernetes Status."""


class NotFoundError(StoreError):
    pass


class AlreadyExistsError(StoreError):
    pass


class ConflictError(StoreError):
    pass


class OwnerGoneError(NotFoundError):
    """A controller's write for an owner that was deleted, or is being deleted, meanwhile."""


class GoneError(StoreError):
    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


class StoreVersionError(StoreError):
    pass


class StoreFullError(StoreError):
    """The disk (or file system) holding the store has no room for the write; nothing was written."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"insufficient storage: the store's disk is full ({path})")
        self.path = path


class StoreDamagedError(StoreError):
    """``store.db`` is not a database, or fails SQLite's integrity check."""

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(
            f"the store {path} is damaged ({detail}). Stop the daemon, then restore {path.name} from a backup, "
            f"or move it aside to start with an empty store: mv {path} {path}.damaged (the files next to it, "
            f"{path.name}-wal and {path.name}-shm, belong to it: move them too)"
        )
        self.path = path


def _is_full(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name == "SQLITE_FULL" or "disk is full" in str(exc) or "No space left" in str(exc)


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED
    resource: str
    namespace: str
    name: str
    rv: int
    object: Unstructured
    # The object before the write (live events only), so a watch can tell when a selector stops matching.
    old: Unstructured | None = None


@dataclass(frozen=True)
class ListResult:
    items: list[Unstructured]
    resource_version: int
    # (namespace, name) of the last item returned when more remain, for ``continue``.
    next_key: tuple[str, str] | None


@dataclass(frozen=True)
class RawListResult:
    items: list[str]  # each object's stored JSON text
    resource_version: int
    next_key: tuple[str, str] | None


Listener = Callable[[WatchEvent], None]


def now_timestamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dumps(obj: Any) -> str:
    return jsoncodec.encode_text(obj)


_loads = jsoncodec.decode
_copy = jsoncodec.copy
# An update or delete decodes the object it replaces outside the lock (a large object takes tens of
# milliseconds, and every reader waits for the lock) and commits if nothing was written meanwhile;
# after this many tries it reads under the lock.
_OPTIMISTIC_TRIES = 3


def _stamp_new(meta: ObjectMeta, rv: int, uid: str | None = None) -> None:
    """What the API server sets on an object it creates (``uid``: one the caller generated)."""
    meta["uid"] = uid or str(uuid.uuid4())
    meta["creationTimestamp"] = now_timestamp()
    meta["generation"] = 1
    meta["resourceVersion"] = str(rv)
    meta.pop("deletionTimestamp", None)


class Store:
    """Thread-safe. Writes are serialised by a lock on one connection; reads go through connections
    of their own (a pool), so that no read waits for a write: in WAL mode a reader sees the last
    commit while the next is being written, and writing a large object (a ConfigMap of 150,000
    keys: 10 MB with its event) holds the writer's lock for tens of milliseconds."""

    def __init__(self, path: Path, *, durable: bool = False, event_retention: int = 50_000, check: bool = True) -> None:
        """``check``: run SQLite's ``integrity_check`` first (the daemon does, once per start)."""
        self.path = path
        self._lock = threading.RLock()
        self._readers: builtins.list[sqlite3.Connection] = []  # idle read connections
        self._readers_lock = threading.Lock()
        self._closed = False
        self._listeners: builtins.list[Listener] = []
        self._event_retention = event_retention
        self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self._conn.execute("PRAGMA busy_timeout=5000")
            if check:
                self._check_integrity()
            self._open_schema()
            self._rv = int(self._meta("resource_version", "0"))
            self._compacted = int(self._meta("compacted_rv", "0"))
            # checkpoints on a thread of their own (checkpointer.py), not inside a writer's COMMIT
            self._conn.execute("PRAGMA wal_autocheckpoint=0")
            self._conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        except (sqlite3.DatabaseError, ValueError) as exc:
            self._conn.close()
            if isinstance(exc, sqlite3.Error) and _is_full(exc):
                raise StoreFullError(path) from None
            raise StoreDamagedError(path, str(exc)) from None
        self._writes_since_compaction = 0
        self._checkpointer = Checkpointer(path)

    # -- schema ---------------------------------------------------------------------------------
    def _check_integrity(self) -> None:
        rows = self._conn.execute("PRAGMA integrity_check(5)").fetchall()
        problems = [str(row[0]) for row in rows if row[0] != "ok"]
        if problems:
            raise StoreDamagedError(self.path, "; ".join(problems))

    def _open_schema(self) -> None:
        with self._lock:
            tables = {row[0] for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "meta" not in tables:
                self._conn.executescript(_SCHEMA_V1)
                self._conn.execute(
                    "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?), ('resource_version', '0'), "
                    "('compacted_rv', '0')",
                    (str(SCHEMA_VERSION),),
                )
                self._conn.executescript(_INDEXES)
                return
            version = int(self._meta("schema_version", "0"))
            if version > SCHEMA_VERSION:
                raise StoreVersionError(
                    f"the store {self.path} has schema version {version}, but this airflow-provider-training "
                    f"understands versions up to {SCHEMA_VERSION}: upgrade the provider, or use another "
                    "--home / AIRFLOW_TRAINING_HOME"
                )
            if version < SCHEMA_VERSION:
                self._migrate(version)
            self._conn.executescript(_INDEXES)

    def _migrate(self, version: int) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for step in range(version, SCHEMA_VERSION):
                if step not in MIGRATIONS:
                    raise StoreVersionError(
                        f"the store {self.path} has schema version {version} and no migration from version "
                        f"{step} exists; export the objects with an older provider and start a fresh --home"
                    )
                MIGRATIONS[step](self._conn)
            self._conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def _meta(self, key: str, default: str) -> str:
        row = self._conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row else default

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._meta("schema_version", "0"))

    @property
    def resource_version(self) -> int:
        return self._rv

    @property
    def compacted_resource_version(self) -> int:
        return self._compacted

    def close(self) -> None:
        self._checkpointer.close()
        with self._readers_lock:
            self._closed = True
            idle, self._readers = self._readers, []
        for conn in idle:
            conn.close()
        with self._lock:
            self._conn.close()

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A read connection of the pool, for one read (several statements: one transaction)."""
        with self._readers_lock:
            conn = self._readers.pop() if self._readers else None
        if conn is None:
            conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=5000")
        try:
            yield conn
        finally:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            with self._readers_lock:
                if self._closed:
                    conn.close()
                else:
                    self._readers.append(conn)

    # -- listeners ------------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` after every committed write, in commit order, from the writer's thread."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    # -- reads ----------------------------------------------------------------------------------
    def get(self, resource: str, namespace: str, name: str) -> Unstructured | None:
        raw = self.get_raw(resource, namespace, name)
        return _loads(raw) if raw is not None else None

    def get_raw(self, resource: str, namespace: str, name: str) -> str | None:
        """The stored JSON text of an object (what a GET answers, without decoding and encoding it)."""
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT body FROM objects WHERE resource=? AND namespace=? AND name=?",
                (resource, namespace, name),
            ).fetchall()
        return str(rows[0][0]) if rows else None

    def _row(
        self, resource: str, namespace: str, name: str, conn: sqlite3.Connection | None = None
    ) -> tuple[str, int] | None:
        """(body, resourceVersion) of an object (the writer's connection: called with the lock held)."""
        row = (
            (conn or self._conn)
            .execute(
                "SELECT body, rv FROM objects WHERE resource=? AND namespace=? AND name=?", (resource, namespace, name)
            )
            .fetchone()
        )
        return (str(row[0]), int(row[1])) if row else None

    def _row_rv(self, resource: str, namespace: str, name: str, conn: sqlite3.Connection | None = None) -> int | None:
        row = (
            (conn or self._conn)
            .execute("SELECT rv FROM objects WHERE resource=? AND namespace=? AND name=?", (resource, namespace, name))
            .fetchone()
        )
        return int(row[0]) if row else None

    def _read_current(
        self, resource: str, namespace: str, name: str, attempt: int, expected: Unstructured | None = None
    ) -> tuple[Unstructured, int] | None:
        """The stored object and its resourceVersion for a write: ``expected`` (the caller's copy)
        while it is current, else decoded outside the lock on the first tries (the caller re-checks
        the resourceVersion under the lock), under it after."""
        if expected is not None and attempt == 0:
            with self._reading() as conn:
                rv = self._row_rv(resource, namespace, name, conn)
            if rv is None:
                return None
            if str(rv) == str((expected.get("metadata") or {}).get("resourceVersion")):
                return expected, rv
        if attempt < _OPTIMISTIC_TRIES:
            with self._reading() as conn:
                row = self._row(resource, namespace, name, conn)
            return (_loads(row[0]), row[1]) if row else None
        row = self._row(resource, namespace, name)  # (the caller holds the lock)
        return (_loads(row[0]), row[1]) if row else None

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_equals: Iterable[tuple[str, str]] = (),
        label_filter: Callable[[dict[str, str]], bool] | None = None,
        object_filter: Callable[[Unstructured], bool] | None = None,
        after: tuple[str, str] | None = None,
        limit: int | None = None,
    ) -> ListResult:
        """List in (namespace, name) order. Equality terms narrow through the label index and the
        label filter runs on the small labels column, so bodies are decoded only for candidates."""
        rows, rv = self._select(resource, namespace, label_equals, label_filter, object_filter, after, limit)
        items: builtins.list[Unstructured] = []
        next_key: tuple[str, str] | None = None
        for _ns, _name, labels, body in rows:
            if label_filter is not None and not label_filter(_loads(labels)):
                continue
            obj = _loads(body)
            if object_filter is not None and not object_filter(obj):
                continue
            if limit is not None and len(items) >= limit:
                last = items[-1]["metadata"]
                next_key = (last.get("namespace", ""), last["name"])
                break
            items.append(obj)
        return ListResult(items, rv, next_key)

    def list_raw(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_equals: Iterable[tuple[str, str]] = (),
        label_filter: Callable[[dict[str, str]], bool] | None = None,
        after: tuple[str, str] | None = None,
        limit: int | None = None,
        object_filter: None = None,
    ) -> RawListResult:
        """:meth:`list` with each item's stored JSON text, not decoded (a list answered as stored)."""
        rows, rv = self._select(resource, namespace, label_equals, label_filter, None, after, limit)
        items: builtins.list[str] = []
        names: builtins.list[tuple[str, str]] = []
        next_key: tuple[str, str] | None = None
        for ns, name, labels, body in rows:
            if label_filter is not None and not label_filter(_loads(labels)):
                continue
            if limit is not None and len(items) >= limit:
                next_key = names[-1]
                break
            items.append(str(body))
            names.append((ns, name))
        return RawListResult(items, rv, next_key)

    def _select(
        self,
        resource: str,
        namespace: str | None,
        label_equals: Iterable[tuple[str, str]],
        label_filter: Callable[[dict[str, str]], bool] | None,
        object_filter: Callable[[Unstructured], bool] | None,
        after: tuple[str, str] | None,
        limit: int | None,
    ) -> tuple[builtins.list[tuple[str, str, str, str]], int]:
        terms = list(label_equals)
        params: builtins.list[Any] = []
        if terms:
            # The first equality term drives the query from the label index (CROSS JOIN fixes
            # SQLite's loop order), so only matching objects' rows are ever read.
            key, value = terms.pop(0)
            sql = [
                "SELECT o.namespace, o.name, o.labels, o.body FROM labels l CROSS JOIN objects o "
                "ON o.resource=l.resource AND o.namespace=l.namespace AND o.name=l.name "
                "WHERE l.resource=? AND l.key=? AND l.value=?"
            ]
            params += [resource, key, value]
        else:
            sql = ["SELECT o.namespace, o.name, o.labels, o.body FROM objects o WHERE 1"]
        for key, value in terms:
            sql.append(
                " AND EXISTS (SELECT 1 FROM labels x WHERE x.resource=o.resource AND x.key=? AND x.value=? "
                "AND x.namespace=o.namespace AND x.name=o.name)"
            )
            params += [key, value]
        sql.append(" AND o.resource=?")
        params.append(resource)
        if namespace is not None:
            sql.append(" AND o.namespace=?")
            params.append(namespace)
        if after is not None:
            sql.append(" AND (o.namespace, o.name) > (?, ?)")
            params += list(after)
        sql.append(" ORDER BY o.namespace, o.name")
        if limit is not None and label_filter is None and object_filter is None:
            sql.append(" LIMIT ?")  # a page reads its own rows (and one to tell there are more), not the rest
            params.append(limit + 1)
        with self._reading() as conn:
            conn.execute("BEGIN")  # (the rows and the resourceVersion from one snapshot)
            rows = conn.execute("".join(sql), params).fetchall()
            rv = int(conn.execute("SELECT value FROM meta WHERE key='resource_version'").fetchall()[0][0])
            conn.execute("COMMIT")
        return rows, rv

    def list_controlled(
        self, resource: str, owner: Mapping[str, Any] | ObjectRef, *, label_equals: Iterable[tuple[str, str]] = ()
    ) -> builtins.list[Unstructured]:
        """The objects of ``resource`` in ``owner``'s namespace that ``owner`` controls (their
        controlling ownerReference names its uid), narrowed first by ``label_equals`` as a
        controller's selector narrows them. A child with the labels but another controller, or
        malformed references, is not one of them."""
        ref = owner if isinstance(owner, ObjectRef) else ObjectRef.of(owner)
        items = self.list(resource, ref.namespace, label_equals=label_equals).items
        return [obj for obj in items if controlled_by(obj, ref.uid)]

    def dependents(self, owner_uid: str) -> builtins.list[tuple[str, str, str]]:
        """(resource, namespace, name) of every object whose ownerReferences name ``owner_uid``."""
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT resource, namespace, name FROM owners WHERE owner_uid=?", (owner_uid,)
            ).fetchall()
        return [(r, ns, n) for r, ns, n in rows]

    def events_since(self, rv: int, resource: str | None = None) -> builtins.list[WatchEvent]:
        """Events after ``rv`` from the log; ``GoneError`` when the log no longer reaches back that far."""
        with self._reading() as conn:
            conn.execute("BEGIN")  # (the log and how far back it reaches from one snapshot)
            compacted = int(conn.execute("SELECT value FROM meta WHERE key='compacted_rv'").fetchall()[0][0])
            if rv < compacted:
                raise GoneError(rv, compacted + 1)
            sql = "SELECT rv, resource, namespace, name, type, body FROM events WHERE rv>?"
            params: builtins.list[Any] = [rv]
            if resource is not None:
                sql += " AND resource=?"
                params.append(resource)
            rows = conn.execute(sql + " ORDER BY rv", params).fetchall()
        return [WatchEvent(t, r, ns, n, v, _loads(b)) for v, r, ns, n, t, b in rows]

    # -- writes ---------------------------------------------------------------------------------
    def create(
        self,
        resource: str,
        obj: Unstructured,
        *,
        uid: str | None = None,
        copy: bool = True,
        owner: tuple[str, Unstructured] | None = None,
    ) -> Unstructured:
        """Store a new object; returns a copy with the server-set metadata (``obj`` is left alone).
        ``uid``: one the caller generated (a batch/v1 Job's selector names its own uid). ``copy``:
        False when the caller hands ``obj`` over (never touches it again): no copy of a large object.
        ``owner``: (resource, object) a controller creates ``obj`` for: ``OwnerGoneError`` unless it
        is still stored and not being deleted when the write commits (the API server deletes an
        owner and its dependents on a thread of its own: a child written after it listed them
        would outlive the owner)."""
        obj = _copy(obj) if copy else obj
        meta = obj.setdefault("metadata", {})
        namespace, name = meta.get("namespace", ""), meta["name"]
        _stamp_new(meta, 0, uid)
        encoded = _Encoded(obj)
        with self._lock:
            self._check_owner(owner)
            if self._exists(resource, namespace, name):
                raise AlreadyExistsError(name)
            rv = self._rv + 1
            meta["resourceVersion"] = str(rv)
            self._commit(rv, [("ADDED", resource, obj, None)], encoded)
        return obj

    def create_many(self, resource: str, objs: builtins.list[Unstructured]) -> builtins.list[Unstructured]:
        """Store new objects in one transaction (one resourceVersion each, in order, as ``create``
        one by one would give them): for records such as Events that a controller writes in bursts.
        ``AlreadyExistsError`` for any name stores none of them."""
        created = self._create_all([(resource, obj) for obj in objs], skip_existing=False)
        return [obj for obj in created if obj is not None]

    def create_missing(
        self, items: builtins.list[tuple[str, Unstructured]], *, owner: tuple[str, Unstructured] | None = None
    ) -> builtins.list[Unstructured | None]:
        """Store the (resource, object) pairs whose names are free, in one transaction and in order
        (one resourceVersion each, as ``create`` one by one would give them); None for a name that
        exists, as ``create`` would refuse it: a controller's pass writes what it lacks at once.
        ``owner``: as for :meth:`create`."""
        return self._create_all(items, skip_existing=True, owner=owner)

    def _check_owner(self, owner: tuple[str, Unstructured] | None) -> None:
        """(called with the lock held)"""
        if owner is None:
            return
        resource, obj = owner
        meta = obj["metadata"]
        row = self._row(resource, meta.get("namespace", ""), meta["name"])
        current = _loads(row[0])["metadata"] if row is not None else None
        if current is None or current.get("uid") != meta.get("uid") or current.get("deletionTimestamp"):
            raise OwnerGoneError(meta["name"])

    def _create_all(
        self,
        items: builtins.list[tuple[str, Unstructured]],
        *,
        skip_existing: bool,
        owner: tuple[str, Unstructured] | None = None,
    ) -> builtins.list[Unstructured | None]:
        out: builtins.list[Unstructured | None] = []
        copies = [(resource, _copy(given)) for resource, given in items]  # (outside the lock)
        with self._lock:
            self._check_owner(owner)
            rv = self._rv
            changes: builtins.list[tuple[str, str, Unstructured, Unstructured | None]] = []
            names = set()
            for resource, obj in copies:
                meta = obj.setdefault("metadata", {})
                key = (resource, meta.get("namespace", ""), meta["name"])
                if key in names or self._exists(*key):
                    if not skip_existing:
                        raise AlreadyExistsError(meta["name"])
                    out.append(None)
                    continue
                names.add(key)
                rv += 1
                _stamp_new(meta, rv)
                changes.append(("ADDED", resource, obj, None))
                out.append(obj)
            if changes:
                self._commit(self._rv + 1, changes)
        return out

    def update(
        self,
        resource: str,
        obj: Unstructured,
        *,
        check_rv: bool = True,
        also_create: Sequence[tuple[str, Unstructured]] = (),
        copy: bool = True,
        expected: Unstructured | None = None,
    ) -> Unstructured:
        """Replace an object. A ``metadata.resourceVersion`` in ``obj`` must match the stored one
        (``ConflictError``); an object being deleted whose last finalizer goes is removed.
        ``also_create``: new (resource, object) pairs stored in the same transaction, after it (a
        controller's status and the Events of its pass: one commit, and watchers see the status
        one step sooner). ``copy``: as for :meth:`create`. ``expected``: the stored object as the
        caller read it (and left it), used as the old object while still current (not decoded again)."""
        obj = _copy(obj) if copy else obj
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        given_rv = meta.get("resourceVersion")
        extras = [(extra_resource, _copy(given)) for extra_resource, given in also_create]
        for attempt in range(_OPTIMISTIC_TRIES + 1):
            with self._lock if attempt == _OPTIMISTIC_TRIES else contextlib.nullcontext():
                current = self._read_current(resource, namespace, name, attempt, expected)
                if current is None:
                    raise NotFoundError(name)
                old, old_rv = current
                # (what depends only on ``old`` is done outside the lock: a large object's compare and encoding)
                _carry_metadata(meta, old["metadata"], _spec_of(obj) != _spec_of(old))
                encoded = _Encoded(obj)
                with self._lock:
                    if self._row_rv(resource, namespace, name) != old_rv:
                        continue  # written meanwhile: read it again
                    if check_rv and given_rv and given_rv != old["metadata"]["resourceVersion"]:
                        meta["resourceVersion"] = given_rv
                        raise ConflictError(name)
                    self._write_update(resource, obj, old, extras, encoded)
                    return obj
        raise AssertionError("unreachable: the last try holds the lock")

    def update_with(
        self,
        resource: str,
        namespace: str,
        name: str,
        change: Callable[[Unstructured], Unstructured | None],
        *,
        also_create: Sequence[tuple[str, Unstructured]] = (),
    ) -> Unstructured | None:
        """Read, change and write one object as one step, no other write between (a status that a
        controller or the node owns, written over whatever else changed meanwhile: the API server's
        requests run on threads). ``change(current)`` returns the object to store, or None to write
        nothing. Returns what was stored, None when nothing was; ``NotFoundError`` when it is gone."""
        extras = [(extra_resource, _copy(given)) for extra_resource, given in also_create]
        with self._lock:
            row = self._row(resource, namespace, name)
            if row is None:
                raise NotFoundError(name)
            old = _loads(row[0])
            new = change(_loads(row[0]))
            if new is None:
                return None
            _carry_metadata(new["metadata"], old["metadata"], _spec_of(new) != _spec_of(old))
            self._write_update(resource, new, old, extras)
            return new

    def update_many_with(
        self,
        resource: str,
        items: Sequence[
            tuple[str, str, Callable[[Unstructured], Unstructured | None], Sequence[tuple[str, Unstructured]]]
        ],
    ) -> builtins.list[Unstructured | None]:
        """:meth:`update_with` for each (namespace, name, change, also_create), all in one transaction
        (the node agent's statuses for a large group of pods: one commit, not one per pod). An object
        that is gone, or whose ``change`` returns None, is left out (None in its place)."""
        with self._lock:
            rv = self._rv + 1
            changes: builtins.list[tuple[str, str, Unstructured, Unstructured | None]] = []
            out: builtins.list[Unstructured | None] = []
            for namespace, name, change, also_create in items:
                row = self._row(resource, namespace, name)
                new = change(_loads(row[0])) if row is not None else None
                if row is None or new is None:
                    out.append(None)
                    continue
                old = _loads(row[0])
                _carry_metadata(new["metadata"], old["metadata"], _spec_of(new) != _spec_of(old))
                extras = [(extra_resource, _copy(given)) for extra_resource, given in also_create]
                changes += self._update_changes(resource, new, old, extras, rv + len(changes))
                out.append(new)
            if changes:
                self._commit(rv, changes)
        return out

    def _write_update(
        self,
        resource: str,
        obj: Unstructured,
        old: Unstructured,
        extras: builtins.list[tuple[str, Unstructured]],
        encoded: _Encoded | None = None,
    ) -> None:
        """(called with the lock held, ``obj``'s metadata carried over from ``old``, the stored object)"""
        rv = self._rv + 1
        self._commit(rv, self._update_changes(resource, obj, old, extras, rv), encoded)

    def _update_changes(
        self,
        resource: str,
        obj: Unstructured,
        old: Unstructured,
        extras: builtins.list[tuple[str, Unstructured]],
        rv: int,
    ) -> builtins.list[tuple[str, str, Unstructured, Unstructured | None]]:
        """An update's changes for ``_commit``, the first at resourceVersion ``rv`` (lock held)."""
        meta = obj["metadata"]
        meta["resourceVersion"] = str(rv)
        deleted = meta.get("deletionTimestamp") and not meta.get("finalizers")
        changes: builtins.list[tuple[str, str, Unstructured, Unstructured | None]] = [
            ("DELETED" if deleted else "MODIFIED", resource, obj, old)
        ]
        for extra_resource, extra in extras:
            extra_meta = extra.setdefault("metadata", {})
            if self._exists(extra_resource, extra_meta.get("namespace", ""), extra_meta["name"]):
                raise AlreadyExistsError(extra_meta["name"])
            _stamp_new(extra_meta, rv + len(changes))
            changes.append(("ADDED", extra_resource, extra, None))
        return changes

    def delete(
        self,
        resource: str,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        expected: Unstructured | None = None,
    ) -> Unstructured:
        """Remove an object, or mark it (``deletionTimestamp``) while finalizers remain. ``expected``:
        as for :meth:`update`."""
        for attempt in range(_OPTIMISTIC_TRIES + 1):
            with self._lock if attempt == _OPTIMISTIC_TRIES else contextlib.nullcontext():
                current = self._read_current(resource, namespace, name, attempt, expected)
                if current is None or (uid is not None and current[0]["metadata"].get("uid") != uid):
                    raise NotFoundError(name)
                old, old_rv = current
                # (only its metadata changes: the rest is shared with ``old``, both decoded for this call)
                obj: Unstructured = {**old, "metadata": dict(old["metadata"])}
                meta = obj["metadata"]
                marked = bool(meta.get("finalizers"))
                if marked and meta.get("deletionTimestamp"):
                    with self._lock:
                        if self._row_rv(resource, namespace, name) != old_rv:
                            continue
                    return old  # being deleted already
                meta["deletionTimestamp"] = meta.get("deletionTimestamp") or now_timestamp()
                encoded = _Encoded(obj)  # (outside the lock)
                with self._lock:
                    if self._row_rv(resource, namespace, name) != old_rv:
                        continue  # written meanwhile: read it again
                    rv = self._rv + 1
                    meta["resourceVersion"] = str(rv)
                    self._commit(rv, [("MODIFIED" if marked else "DELETED", resource, obj, old)], encoded)
                    return obj
        raise AssertionError("unreachable: the last try holds the lock")

    def mark_deleting(self, resource: str, namespace: str, name: str, uid: str, finalizer: str) -> Unstructured:
        """Set ``deletionTimestamp`` and add ``finalizer`` (kube-apiserver's foreground deletion: the
        object stays, being deleted, while its dependents go; controllers leave it alone)."""
        with self._lock:
            row = self._row(resource, namespace, name)
            old = _loads(row[0]) if row is not None else None
            if old is None or old["metadata"].get("uid") != uid:
                raise NotFoundError(name)
            obj = _loads(row[0])  # type: ignore[index]
            meta = obj["metadata"]
            meta.setdefault("deletionTimestamp", now_timestamp())
            meta["finalizers"] = [*[f for f in meta.get("finalizers") or [] if f != finalizer], finalizer]
            rv = self._rv + 1
            meta["resourceVersion"] = str(rv)
            self._commit(rv, [("MODIFIED", resource, obj, old)])
            return obj

    def delete_many(self, resource: str, keys: Iterable[tuple[str, str]]) -> int:
        """Delete the (namespace, name) objects of ``resource`` that exist, in one transaction (one
        resourceVersion each, as ``delete`` one by one); returns how many went. For sweeps, such as
        Events past their time to live; an object with finalizers is marked, as ``delete`` does."""
        with self._lock:
            rv = self._rv + 1
            changes: builtins.list[tuple[str, str, Unstructured, Unstructured | None]] = []
            for namespace, name in keys:
                old = self.get(resource, namespace, name)
                if old is None or (old["metadata"].get("finalizers") and old["metadata"].get("deletionTimestamp")):
                    continue
                obj: Unstructured = _copy(old)
                meta = obj["metadata"]
                meta["resourceVersion"] = str(rv + len(changes))
                marked = bool(meta.get("finalizers"))
                meta["deletionTimestamp"] = meta.get("deletionTimestamp") or now_timestamp()
                changes.append(("MODIFIED" if marked else "DELETED", resource, obj, old))
            if changes:
                self._commit(rv, changes)
        return len(changes)

    def _exists(self, resource: str, namespace: str, name: str) -> bool:
        return (
            self._conn.execute(
                "SELECT 1 FROM objects WHERE resource=? AND namespace=? AND name=?",
                (resource, namespace, name),
            ).fetchone()
            is not None
        )

    def _commit(
        self,
        rv: int,
        changes: builtins.list[tuple[str, str, Unstructured, Unstructured | None]],
        encoded: _Encoded | None = None,
    ) -> None:
        """Write ``changes`` in one transaction; the i-th gets resourceVersion ``rv + i``.
        ``encoded``: the first change's object, encoded already."""
        conn = self._conn
        first = rv
        written = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            for rv, (event_type, resource, obj, _old) in enumerate(changes, start=first):
                meta = obj["metadata"]
                ns, name = meta.get("namespace", ""), meta["name"]
                body = encoded.body(rv) if encoded is not None and rv == first else _dumps(obj)
                written += 2 * len(body)  # (the object's row and its event's)
                key = (resource, ns, name)
                if event_type != "ADDED":  # (a new object has no rows to replace)
                    conn.execute("DELETE FROM labels WHERE resource=? AND namespace=? AND name=?", key)
                    conn.execute("DELETE FROM owners WHERE resource=? AND namespace=? AND name=?", key)
                if event_type == "DELETED":
                    conn.execute("DELETE FROM objects WHERE resource=? AND namespace=? AND name=?", key)
                else:
                    labels = meta.get("labels") or {}
                    conn.execute(
                        "INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (resource, ns, name, meta["uid"], rv, _dumps(labels) if labels else "{}", body),
                    )
                    if labels:
                        conn.executemany(
                            "INSERT OR IGNORE INTO labels VALUES (?, ?, ?, ?, ?)",
                            [(resource, k, str(v), ns, name) for k, v in labels.items()],
                        )
                    owners = [ref["uid"] for ref in owner_references(obj) if "uid" in ref]
                    if owners:
                        conn.executemany(
                            "INSERT OR IGNORE INTO owners VALUES (?, ?, ?, ?)",
                            [(u, resource, ns, name) for u in owners],
                        )
                conn.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", (rv, resource, ns, name, event_type, body))
            conn.execute("UPDATE meta SET value=? WHERE key='resource_version'", (str(rv),))
            self._writes_since_compaction += len(changes)
            if self._writes_since_compaction >= min(1000, max(1, self._event_retention // 10)):
                self._compact(rv)
            conn.execute("COMMIT")
            self._checkpointer.wrote(written)
        except BaseException as exc:
            # SQLite rolls back by itself on some errors (a full disk): only roll back what is open.
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error) and _is_full(exc):
                raise StoreFullError(self.path) from None
            raise
        self._rv = rv
        for rv, (event_type, resource, obj, old) in enumerate(changes, start=first):
            meta = obj["metadata"]
            event = WatchEvent(event_type, resource, meta.get("namespace", ""), meta["name"], rv, obj, old)
            for listener in list(self._listeners):
                listener(event)

    def _compact(self, rv: int) -> None:
        floor = rv - self._event_retention
        self._writes_since_compaction = 0
        if floor <= self._compacted:
            return
        self._conn.execute("DELETE FROM events WHERE rv<=?", (floor,))
        self._conn.execute("UPDATE meta SET value=? WHERE key='compacted_rv'", (str(floor),))
        self._compacted = floor

    def iter_all(self) -> Iterator[tuple[str, Unstructured]]:
        """Every stored object with its resource key (for controllers' initial sync and tooling)."""
        with self._reading() as conn:
            rows = conn.execute("SELECT resource, body FROM objects").fetchall()
        for resource, body in rows:
            yield resource, _loads(body)


class _Encoded:
    """An object's JSON, encoded before the writer's lock is taken but for its resourceVersion, which
    only the lock hands out: encoding a 5 MB object takes 20-30 ms, and every write waited for it."""

    def __init__(self, obj: Unstructured) -> None:
        mark = f"rv-{uuid.uuid4().hex}"  # (a value no object holds: the one place to put it)
        obj["metadata"]["resourceVersion"] = mark
        self.head, _, self.tail = _dumps(obj).partition(f'"{mark}"')

    def body(self, rv: int) -> str:
        return f'{self.head}"{rv}"{self.tail}'


def _carry_metadata(meta: dict[str, Any], old_meta: dict[str, Any], spec_changed: bool) -> None:
    """What an update keeps of the stored object's metadata, and its generation."""
    for key in ("uid", "creationTimestamp", "deletionTimestamp", "generation"):
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    if spec_changed:
        meta["generation"] = int(old_meta.get("generation", 1)) + 1


def _spec_of(obj: Unstructured) -> Unstructured:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}
