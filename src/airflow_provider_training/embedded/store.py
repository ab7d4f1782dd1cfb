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
import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

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


Listener = Callable[[WatchEvent], None]


def now_timestamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _stamp_new(meta: ObjectMeta, rv: int, uid: str | None = None) -> None:
    """What the API server sets on an object it creates (``uid``: one the caller generated)."""
    meta["uid"] = uid or str(uuid.uuid4())
    meta["creationTimestamp"] = now_timestamp()
    meta["generation"] = 1
    meta["resourceVersion"] = str(rv)
    meta.pop("deletionTimestamp", None)


class Store:
    """Thread-safe; writes are serialised by a lock, reads share the same connection under it."""

    def __init__(self, path: Path, *, durable: bool = False, event_retention: int = 50_000, check: bool = True) -> None:
        """``check``: run SQLite's ``integrity_check`` first (the daemon does, once per start)."""
        self.path = path
        self._lock = threading.RLock()
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
        except (sqlite3.DatabaseError, ValueError) as exc:
            self._conn.close()
            if isinstance(exc, sqlite3.Error) and _is_full(exc):
                raise StoreFullError(path) from None
            raise StoreDamagedError(path, str(exc)) from None
        self._writes_since_compaction = 0

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
        with self._lock:
            self._conn.close()

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
        with self._lock:
            row = self._conn.execute(
                "SELECT body FROM objects WHERE resource=? AND namespace=? AND name=?",
                (resource, namespace, name),
            ).fetchone()
        return json.loads(row[0]) if row else None

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
        items: builtins.list[Unstructured] = []
        next_key: tuple[str, str] | None = None
        with self._lock:
            rv = self._rv
            rows = self._conn.execute("".join(sql), params).fetchall()
        for _ns, _name, labels, body in rows:
            if label_filter is not None and not label_filter(json.loads(labels)):
                continue
            obj = json.loads(body)
            if object_filter is not None and not object_filter(obj):
                continue
            if limit is not None and len(items) >= limit:
                last = items[-1]["metadata"]
                next_key = (last.get("namespace", ""), last["name"])
                break
            items.append(obj)
        return ListResult(items, rv, next_key)

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
        with self._lock:
            rows = self._conn.execute(
                "SELECT resource, namespace, name FROM owners WHERE owner_uid=?", (owner_uid,)
            ).fetchall()
        return [(r, ns, n) for r, ns, n in rows]

    def events_since(self, rv: int, resource: str | None = None) -> builtins.list[WatchEvent]:
        """Events after ``rv`` from the log; ``GoneError`` when the log no longer reaches back that far."""
        with self._lock:
            if rv < self._compacted:
                raise GoneError(rv, self._compacted + 1)
            sql = "SELECT rv, resource, namespace, name, type, body FROM events WHERE rv>?"
            params: builtins.list[Any] = [rv]
            if resource is not None:
                sql += " AND resource=?"
                params.append(resource)
            rows = self._conn.execute(sql + " ORDER BY rv", params).fetchall()
        return [WatchEvent(t, r, ns, n, v, json.loads(b)) for v, r, ns, n, t, b in rows]

    # -- writes ---------------------------------------------------------------------------------
    def create(self, resource: str, obj: Unstructured, *, uid: str | None = None) -> Unstructured:
        """Store a new object; returns a copy with the server-set metadata (``obj`` is left alone).
        ``uid``: one the caller generated (a batch/v1 Job's selector names its own uid)."""
        obj = json.loads(_dumps(obj))
        meta = obj.setdefault("metadata", {})
        namespace, name = meta.get("namespace", ""), meta["name"]
        with self._lock:
            if self._exists(resource, namespace, name):
                raise AlreadyExistsError(name)
            rv = self._rv + 1
            _stamp_new(meta, rv, uid)
            self._commit(rv, [("ADDED", resource, obj, None)])
        return obj

    def create_many(self, resource: str, objs: builtins.list[Unstructured]) -> builtins.list[Unstructured]:
        """Store new objects in one transaction (one resourceVersion each, in order, as ``create``
        one by one would give them): for records such as Events that a controller writes in bursts.
        ``AlreadyExistsError`` for any name stores none of them."""
        created = self._create_all([(resource, obj) for obj in objs], skip_existing=False)
        return [obj for obj in created if obj is not None]

    def create_missing(self, items: builtins.list[tuple[str, Unstructured]]) -> builtins.list[Unstructured | None]:
        """Store the (resource, object) pairs whose names are free, in one transaction and in order
        (one resourceVersion each, as ``create`` one by one would give them); None for a name that
        exists, as ``create`` would refuse it: a controller's pass writes what it lacks at once."""
        return self._create_all(items, skip_existing=True)

    def _create_all(
        self, items: builtins.list[tuple[str, Unstructured]], *, skip_existing: bool
    ) -> builtins.list[Unstructured | None]:
        out: builtins.list[Unstructured | None] = []
        with self._lock:
            rv = self._rv
            changes: builtins.list[tuple[str, str, Unstructured, Unstructured | None]] = []
            names = set()
            for resource, given in items:
                obj = json.loads(_dumps(given))
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
    ) -> Unstructured:
        """Replace an object. A ``metadata.resourceVersion`` in ``obj`` must match the stored one
        (``ConflictError``); an object being deleted whose last finalizer goes is removed.
        ``also_create``: new (resource, object) pairs stored in the same transaction, after it (a
        controller's status and the Events of its pass: one commit, and watchers see the status
        one step sooner)."""
        obj = json.loads(_dumps(obj))
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        with self._lock:
            old = self.get(resource, namespace, name)
            if old is None:
                raise NotFoundError(name)
            old_meta = old["metadata"]
            if check_rv and meta.get("resourceVersion") and meta["resourceVersion"] != old_meta["resourceVersion"]:
                raise ConflictError(name)
            rv = self._rv + 1
            for key in ("uid", "creationTimestamp", "deletionTimestamp", "generation"):
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            if _spec_of(obj) != _spec_of(old):
                meta["generation"] = int(old_meta.get("generation", 1)) + 1
            meta["resourceVersion"] = str(rv)
            deleted = meta.get("deletionTimestamp") and not meta.get("finalizers")
            changes: builtins.list[tuple[str, str, Unstructured, Unstructured | None]] = [
                ("DELETED" if deleted else "MODIFIED", resource, obj, old)
            ]
            for extra_resource, given in also_create:
                extra = json.loads(_dumps(given))
                extra_meta = extra.setdefault("metadata", {})
                if self._exists(extra_resource, extra_meta.get("namespace", ""), extra_meta["name"]):
                    raise AlreadyExistsError(extra_meta["name"])
                _stamp_new(extra_meta, rv + len(changes))
                changes.append(("ADDED", extra_resource, extra, None))
            self._commit(rv, changes)
        return obj

    def delete(self, resource: str, namespace: str, name: str, *, uid: str | None = None) -> Unstructured:
        """Remove an object, or mark it (``deletionTimestamp``) while finalizers remain."""
        with self._lock:
            old = self.get(resource, namespace, name)
            if old is None or (uid is not None and old["metadata"].get("uid") != uid):
                raise NotFoundError(name)
            obj: Unstructured = json.loads(_dumps(old))
            meta = obj["metadata"]
            rv = self._rv + 1
            meta["resourceVersion"] = str(rv)
            if meta.get("finalizers"):
                if meta.get("deletionTimestamp"):
                    return old
                meta["deletionTimestamp"] = now_timestamp()
                self._commit(rv, [("MODIFIED", resource, obj, old)])
            else:
                meta.setdefault("deletionTimestamp", now_timestamp())
                self._commit(rv, [("DELETED", resource, obj, old)])
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
                obj: Unstructured = json.loads(_dumps(old))
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

    def _commit(self, rv: int, changes: builtins.list[tuple[str, str, Unstructured, Unstructured | None]]) -> None:
        """Write ``changes`` in one transaction; the i-th gets resourceVersion ``rv + i``."""
        conn = self._conn
        first = rv
        conn.execute("BEGIN IMMEDIATE")
        try:
            for rv, (event_type, resource, obj, _old) in enumerate(changes, start=first):
                meta = obj["metadata"]
                ns, name = meta.get("namespace", ""), meta["name"]
                body = _dumps(obj)
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
        with self._lock:
            rows = self._conn.execute("SELECT resource, body FROM objects").fetchall()
        for resource, body in rows:
            yield resource, json.loads(body)


def _spec_of(obj: Unstructured) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}
