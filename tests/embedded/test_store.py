"""The store on its own: resourceVersions, finalizers, the label index, schema versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from airflow_provider_training.embedded import store as store_module
from airflow_provider_training.embedded.apiserver.patch import strategic_merge_patch
from airflow_provider_training.embedded.store import AlreadyExistsError, GoneError, Store, StoreVersionError


def _cm(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns", "labels": labels}}


def test_one_monotonic_resource_version_across_resources(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    a = s.create("core/configmaps", _cm("a"))
    b = s.create("core/secrets", _cm("b"))
    a2 = s.update("core/configmaps", {**a, "data": {"x": "1"}})
    rvs = [int(o["metadata"]["resourceVersion"]) for o in (a, b, a2)]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3
    s.close()
    reopened = Store(tmp_path / "s.db")
    assert reopened.resource_version == rvs[-1]
    assert [e.type for e in reopened.events_since(0)] == ["ADDED", "ADDED", "MODIFIED"]


def test_create_many_gives_each_object_its_own_version_in_order(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    seen = []
    s.subscribe(lambda e: seen.append((e.name, e.rv)))
    s.create("core/configmaps", _cm("taken"))
    with pytest.raises(AlreadyExistsError):
        s.create_many("core/configmaps", [_cm("new"), _cm("taken")])
    assert s.get("core/configmaps", "ns", "new") is None  # all or nothing
    made = s.create_many("core/configmaps", [_cm("b"), _cm("a"), _cm("c")])
    rvs = [int(o["metadata"]["resourceVersion"]) for o in made]
    assert rvs == [2, 3, 4] and s.resource_version == 4
    assert seen[1:] == [("b", 2), ("a", 3), ("c", 4)]
    assert [(e.name, e.rv) for e in s.events_since(1)] == [("b", 2), ("a", 3), ("c", 4)]
    assert s.get("core/configmaps", "ns", "a")["metadata"]["resourceVersion"] == "3"


def test_create_missing_writes_a_passs_objects_of_any_kind_in_one_go_and_skips_taken_names(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    seen = []
    s.subscribe(lambda e: seen.append((e.resource, e.name, e.rv)))
    s.create("core/services", _cm("taken"))
    made = s.create_missing(
        [
            ("core/pods", _cm("taken")),
            ("core/services", _cm("taken")),
            ("core/services", _cm("new")),
            ("core/pods", _cm("x")),
        ]
    )
    assert [None if o is None else o["metadata"]["resourceVersion"] for o in made] == ["2", None, "3", "4"]
    assert seen[1:] == [("core/pods", "taken", 2), ("core/services", "new", 3), ("core/pods", "x", 4)]
    assert s.create_missing([("core/pods", _cm("x"))]) == [None] and s.resource_version == 4  # nothing written


def test_an_update_and_the_objects_created_with_it_are_one_transaction_the_update_first(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    seen = []
    s.subscribe(lambda e: seen.append((e.type, e.resource, e.name, e.rv)))
    job = s.create("core/configmaps", _cm("job"))
    job["data"] = {"status": "Succeeded"}
    s.update("core/configmaps", job, also_create=[("core/events", _cm("job.1")), ("core/events", _cm("job.2"))])
    assert seen[1:] == [
        ("MODIFIED", "core/configmaps", "job", 2),
        ("ADDED", "core/events", "job.1", 3),
        ("ADDED", "core/events", "job.2", 4),
    ]
    job["data"] = {"status": "Failed"}
    with pytest.raises(AlreadyExistsError):  # a taken name: nothing of the transaction is stored
        s.update("core/configmaps", job, check_rv=False, also_create=[("core/events", _cm("job.1"))])
    assert s.resource_version == 4 and s.get("core/configmaps", "ns", "job")["data"] == {"status": "Succeeded"}


def test_finalizers_hold_deletion_until_removed(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    obj = _cm("held")
    obj["metadata"]["finalizers"] = ["training.kubeflow.org/node-agent"]
    s.create("core/pods", obj)
    marked = s.delete("core/pods", "ns", "held")
    assert marked["metadata"]["deletionTimestamp"] and s.get("core/pods", "ns", "held") is not None
    marked["metadata"]["finalizers"] = []
    s.update("core/pods", marked)
    assert s.get("core/pods", "ns", "held") is None
    assert [e.type for e in s.events_since(0)][-1] == "DELETED"


def test_label_equality_narrows_through_the_index(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    for i in range(50):
        s.create("core/pods", _cm(f"p{i}", job="a" if i % 10 == 0 else "b"))
    decoded: list[str] = []
    result = s.list(
        "core/pods",
        "ns",
        label_equals=[("job", "a")],
        object_filter=lambda o: decoded.append(o["metadata"]["name"]) or True,
    )
    assert [o["metadata"]["name"] for o in result.items] == ["p0", "p10", "p20", "p30", "p40"]
    assert len(decoded) == 5  # only the index's candidates were decoded


def test_rewriting_an_object_finds_its_label_and_owner_rows_through_indexes(tmp_path: Path) -> None:
    """A write replaces its object's label and owner rows; a store made before the indexes (an
    older provider's) gets them when opened, keeps its objects, and relabels correctly."""
    path = tmp_path / "s.db"
    Store(path).close()
    with sqlite3.connect(path) as db:  # as an older provider left it
        db.execute("DROP INDEX labels_by_object")
        db.execute("DROP INDEX owners_by_object")
    s = Store(path)
    owned = _cm("p", job="a")
    owned["metadata"]["ownerReferences"] = [{"uid": "u1", "kind": "PyTorchJob", "name": "j", "controller": True}]
    stored = s.create("core/pods", owned)
    stored["metadata"]["labels"] = {"job": "b"}
    s.update("core/pods", stored)
    assert [o["metadata"]["name"] for o in s.list("core/pods", "ns", label_equals=[("job", "b")]).items] == ["p"]
    assert s.list("core/pods", "ns", label_equals=[("job", "a")]).items == []
    assert s.dependents("u1") == [("core/pods", "ns", "p")]
    for table in ("labels", "owners"):
        plan = " ".join(
            str(row[-1])
            for row in s._conn.execute(
                f"EXPLAIN QUERY PLAN DELETE FROM {table} WHERE resource=? AND namespace=? AND name=?", ("a", "b", "c")
            )
        )
        assert f"INDEX {table}_by_object (resource=? AND namespace=? AND name=?)" in plan, plan


def test_compaction_makes_old_versions_gone(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db", event_retention=10)
    for i in range(30):
        s.create("core/configmaps", _cm(f"c{i}"))
    with pytest.raises(GoneError):
        s.events_since(1)
    assert len(s.events_since(s.resource_version - 5)) == 5


def test_newer_schema_refused_older_migrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.db"
    Store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value='7' WHERE key='schema_version'")
    with pytest.raises(StoreVersionError, match="schema version 7"):
        Store(path)

    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    steps: list[int] = []
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(store_module.MIGRATIONS, 1, lambda conn: steps.append(1))
    assert Store(path).schema_version == 2 and steps == [1]


def test_strategic_merge_patch_merges_containers_by_name() -> None:
    pod = {
        "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]},
        "metadata": {"finalizers": ["x"]},
    }
    patched = strategic_merge_patch(
        pod,
        {
            "spec": {
                "containers": [{"name": "b", "image": "2"}, {"name": "a", "$patch": "delete"}],
                "$setElementOrder/containers": [{"name": "b"}],
            },
            "metadata": {"finalizers": ["y"]},
        },
    )
    assert patched == {"spec": {"containers": [{"name": "b", "image": "2"}]}, "metadata": {"finalizers": ["x", "y"]}}


def test_reads_answer_while_a_write_holds_the_store(tmp_path: Path) -> None:
    """Issue 25 item 2: the API server's reads (a client's GET, a controller's list) waited for the
    writer's lock, which a large object's write holds for tens of milliseconds. A write here is held
    inside its lock (a listener that waits) while another thread reads: every read answers, with
    the last commit, and the write then completes."""
    import threading

    s = Store(tmp_path / "s.db")
    s.create("core/configmaps", _cm("first", app="x"))
    inside, release = threading.Event(), threading.Event()

    def hold(event: store_module.WatchEvent) -> None:
        if event.name == "second":
            inside.set()
            release.wait(30)

    s.subscribe(hold)
    writer = threading.Thread(target=s.create, args=("core/configmaps", _cm("second", app="x")))
    writer.start()
    assert inside.wait(10)
    read: dict[str, object] = {}

    def reads() -> None:
        read["get"] = s.get("core/configmaps", "ns", "first") is not None
        read["list"] = [
            o["metadata"]["name"] for o in s.list("core/configmaps", "ns", label_equals=[("app", "x")]).items
        ]
        read["events"] = len(s.events_since(0))
        read["dependents"] = s.dependents("no-such-uid")

    reader = threading.Thread(target=reads)
    reader.start()
    reader.join(10)
    done_while_held = not reader.is_alive()
    release.set()
    writer.join(10)
    reader.join(10)
    assert done_while_held, "a read waited for the writer's lock"
    assert read == {"get": True, "list": ["first", "second"], "events": 2, "dependents": []}
    s.close()


def test_checkpoints_run_beside_the_writers_not_in_their_commits(tmp_path: Path) -> None:
    """SQLite checkpoints the WAL inside the commit that crosses 1,000 pages (40-60 ms here, often
    on the event loop); the store turns that off and a thread of its own checkpoints instead."""
    import time

    from airflow_provider_training.embedded import checkpointer

    s = Store(tmp_path / "s.db")
    assert s._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    s.create("core/configmaps", {**_cm("big"), "data": {"k": "x" * (checkpointer.AFTER_BYTES // 2 + 1)}})
    deadline = time.monotonic() + 30
    while (tmp_path / "s.db").stat().st_size < checkpointer.AFTER_BYTES // 2:  # (still only in the WAL)
        assert time.monotonic() < deadline, "the WAL was not checkpointed into the database file"
        time.sleep(0.05)
    s.close()
