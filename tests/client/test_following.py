"""The follow rules without I/O: the scripted server of ``test_waiting`` answers the requests of
``following.follow``.

Each test plays what a real API server does to a long-lived watch (bookmarks, a dropped
connection, 410 after a gap, a server that cannot watch, a broken line) and checks which requests
the follow makes and which changes it hands on — none lost across a 410.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from airflow_provider_training.client.errors import Forbidden, Gone, Transient, api_error
from airflow_provider_training.client.following import Follower, follow
from airflow_provider_training.client.steps import Run
from tests.client.test_waiting import Server, line


@dataclass
class Settings:
    watch_timeout: float = 60.0
    poll_interval: float = 4.0
    backoff: float = 0.5
    can_watch: bool = True


def job(name: str, rv: str, *, uid: str | None = None, phase: str = "Running") -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}", "resourceVersion": rv}
    return {"kind": "PyTorchJob", "metadata": meta, "status": {"phase": phase}}


def listing(rv: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": rv}, "items": [dict(i) for i in items]}


def bookmark(rv: str) -> str:
    return line("BOOKMARK", {"kind": "PyTorchJob", "metadata": {"resourceVersion": rv}})


def following(server: Server, settings: Settings | None = None) -> tuple[Follower, list[tuple[str, str, str]]]:
    """Run a follow against ``server`` until it has opened its last scripted watch (each test's last
    script is an empty stream); the changes it handed on as (type, name, rv)."""
    seen: list[tuple[str, str, str]] = []
    follower = Follower(
        "PyTorchJob",
        "ns",
        settings or Settings(),
        on_event=lambda t, o: seen.append((t, o["metadata"]["name"], o["metadata"]["resourceVersion"])),
        stopped=lambda: not server.watches,
    )
    server.drive(Run(follow(follower, (10.0, 60.0))))
    return follower, seen


def test_lists_then_watches_from_the_list_and_bookmarks_move_the_cursor() -> None:
    server = Server(
        lists=[listing("10", job("a", "5"), job("b", "7"))],
        watches=[[bookmark("12"), line("MODIFIED", job("a", "13"))], [bookmark("20")], []],
    )
    follower, seen = following(server)
    assert seen == [("ADDED", "a", "5"), ("ADDED", "b", "7"), ("MODIFIED", "a", "13")]
    # the server ended each watch at its timeout: the next one goes on from the last bookmark
    assert server.log == ["list", "watch from 10", "watch from 13", "watch from 20"]
    assert set(follower.objects) == {"a", "b"} and follower.synced


def test_a_dropped_connection_resumes_from_the_cursor_after_a_back_off_without_a_list() -> None:
    server = Server(
        lists=[listing("10", job("a", "5"))],
        watches=[
            [line("MODIFIED", job("a", "11")), Transient(0, "connection reset")],
            Transient(0, "connection refused"),
            Transient(0, "connection refused"),
            [line("MODIFIED", job("a", "12"))],
            [],
        ],
    )
    _, seen = following(server)
    assert server.log == [
        "list",
        "watch from 10",
        "sleep 0.5",
        "watch from 11",
        "sleep 1",
        "watch from 11",
        "sleep 2",
        "watch from 11",
        "watch from 12",  # the event reset the back-off; the server's end needs no pause
    ]
    assert seen[-1] == ("MODIFIED", "a", "12")


def test_410_relists_and_hands_on_what_changed_in_the_gap() -> None:
    """The watch was gone while ``a`` finished, ``b`` was deleted, ``c`` replaced by a namesake and ``d``
    created: after the 410 the new list tells all of it; unchanged ``e`` is not handed on again."""
    server = Server(
        lists=[
            listing("10", job("a", "1"), job("b", "2"), job("c", "3"), job("e", "4")),
            listing(
                "50", job("a", "40", phase="Succeeded"), job("c", "41", uid="new-c"), job("d", "42"), job("e", "4")
            ),
        ],
        watches=[[Gone("too old resource version: 10 (30)")], []],
    )
    follower, seen = following(server)
    assert server.log == ["list", "watch from 10", "list", "watch from 50"]
    assert seen[4:] == [
        ("DELETED", "b", "2"),
        ("DELETED", "c", "3"),
        ("MODIFIED", "a", "40"),
        ("ADDED", "c", "41"),
        ("ADDED", "d", "42"),
    ]
    assert follower.objects["a"]["status"]["phase"] == "Succeeded"
    assert sorted(follower.objects) == ["a", "c", "d", "e"]


def test_a_second_410_in_a_row_backs_off() -> None:
    server = Server(
        lists=[listing("10"), listing("11"), listing("12")],
        watches=[[Gone()], [Gone()], []],
    )
    following(server)
    assert server.log == ["list", "watch from 10", "list", "watch from 11", "sleep 0.5", "list", "watch from 12"]


def test_a_server_that_cannot_watch_is_polled() -> None:
    server = Server(
        lists=[listing("1", job("a", "1")), listing("2", job("a", "2")), listing("3", job("a", "3"))],
        watches=[api_error(405, "watch is not supported")],
    )
    settings = Settings(poll_interval=4.0)

    seen: list[tuple[str, str]] = []
    follower = Follower(
        "PyTorchJob",
        "ns",
        settings,
        on_event=lambda t, o: seen.append((t, o["metadata"]["resourceVersion"])),
        stopped=lambda: not server.lists,
    )
    server.drive(Run(follow(follower, (10.0, 60.0))))
    assert settings.can_watch is False
    assert server.log == ["list", "watch from 1", "list", "sleep 4", "list"]
    assert seen == [("ADDED", "1"), ("MODIFIED", "2"), ("MODIFIED", "3")]


def test_a_refused_first_list_fails_the_follow_and_a_later_one_only_if_it_is_final() -> None:
    with pytest.raises(Forbidden):
        following(Server(lists=[Forbidden(403, "pytorchjobs is forbidden")], watches=[[]]))
    with pytest.raises(Transient):  # nothing to follow yet: the caller decides
        following(Server(lists=[Transient(503, "unavailable")], watches=[[]]))
    server = Server(
        lists=[listing("10"), Transient(503, "unavailable"), listing("20")],
        watches=[[Gone()], []],
    )
    following(server)  # once listed, a failing list is retried after a back-off
    assert server.log == ["list", "watch from 10", "list", "sleep 0.5", "list", "watch from 20"]
    server = Server(lists=[listing("10"), Forbidden(403, "access revoked")], watches=[[Gone()], []])
    with pytest.raises(Forbidden):
        following(server)


def test_hostile_and_oversized_lines() -> None:
    """A line that is not JSON and an ERROR event other than 410 are a broken stream (resume from the
    cursor), not the end of the follow; a 2 MiB object is handed on whole; a resent version is not
    handed on twice."""
    big = job("big", "12")
    big["spec"] = {"blob": "x" * (2 * 1024 * 1024)}
    server = Server(
        lists=[listing("10", job("a", "5"))],
        watches=[
            ['{"type": "MODIFIED", "object": {"metadata"'],
            [line("ERROR", {"kind": "Status", "code": 500, "message": "etcd is sad"})],
            [line("ADDED", big), line("MODIFIED", job("a", "5")), line("MODIFIED", job("a", "13"))],
            [],
        ],
    )
    follower, seen = following(server)
    assert server.log == [
        "list",
        "watch from 10",
        "sleep 0.5",
        "watch from 10",
        "sleep 1",
        "watch from 10",
        "watch from 13",
    ]
    assert seen == [("ADDED", "a", "5"), ("ADDED", "big", "12"), ("MODIFIED", "a", "13")]
    assert len(follower.objects["big"]["spec"]["blob"]) == 2 * 1024 * 1024


def test_a_stopped_follow_makes_no_further_request() -> None:
    server = Server(lists=[listing("10", job("a", "1"))], watches=[[line("MODIFIED", job("a", "2")), bookmark("3")]])
    calls: list[str] = []

    def stopped() -> bool:
        calls.append("asked")
        return len(server.log) >= 2  # after the first watch was opened

    follower = Follower("PyTorchJob", "ns", Settings(), on_event=lambda t, o: None, stopped=stopped)
    server.drive(Run(follow(follower, (10.0, 60.0))))
    assert server.log == ["list", "watch from 10"]
    assert follower.objects["a"]["metadata"]["resourceVersion"] == "2"
