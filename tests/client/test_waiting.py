"""The waiting rules without I/O: a scripted server answers the requests of ``waiting.wait``.

Each test plays what a real API server does (410, a dropped connection, a server that cannot watch,
a deadline passing) and checks what the waiter asks for next and what it returns or raises.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_provider_training.client import JobDeleted, WaitTimeout
from airflow_provider_training.client.errors import ApiError, Forbidden, Gone, NotFound, Transient, api_error
from airflow_provider_training.client.state import finished
from airflow_provider_training.client.steps import Call, ReadOn, Run, Sleep
from airflow_provider_training.client.waiting import Waiter, wait


@dataclass
class Settings:
    watch_timeout: float = 60.0
    poll_interval: float = 4.0
    can_watch: bool = True


def job(rv: str, *, uid: str = "u1", done: bool = False) -> dict[str, Any]:
    conditions = [{"type": "Succeeded", "status": "True"}] if done else [{"type": "Running", "status": "True"}]
    return {
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "ns", "uid": uid, "resourceVersion": rv},
        "status": {"conditions": conditions},
    }


def listed(obj: dict[str, Any], rv: str) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": rv}, "items": [obj]}


def line(type_: str, obj: dict[str, Any]) -> str:
    return json.dumps({"type": type_, "object": obj})


Stream = list[str | ApiError]


@dataclass
class Server:
    """Answers LISTs and watches from scripts; records every request and the clock's sleeps."""

    lists: list[dict[str, Any] | ApiError]
    watches: list[Stream | ApiError] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    now: float = 0.0

    def clock(self) -> float:
        return self.now

    def drive(self, run: Run[Any]) -> Any:
        stream: Iterator[str | ApiError] | None = None
        while (request := run.request) is not None:
            if isinstance(request, ReadOn):
                assert stream is not None
                item = next(stream, None)
                if isinstance(item, ApiError):
                    run.throw(item)
                else:
                    run.send(item)
                continue
            stream = None
            if isinstance(request, Sleep):
                self.log.append(f"sleep {request.seconds:g}")
                self.now += request.seconds
                run.send(None)
                continue
            assert isinstance(request, Call)
            if request.kwargs.get("watch"):
                self.log.append(f"watch from {request.kwargs['resource_version']}")
                script = self.watches.pop(0)
                if isinstance(script, ApiError):
                    run.throw(script)
                    continue
                stream = iter(script)
                item = next(stream, None)
                run.throw(item) if isinstance(item, ApiError) else run.send(item)
            else:
                self.log.append("list")
                answer = self.lists.pop(0)
                run.throw(answer) if isinstance(answer, ApiError) else run.send(answer)
        return run.result()


def waiting(
    server: Server, settings: Settings | None = None, *, timeout: float | None = None, **kwargs: Any
) -> Callable[[], dict[str, Any]]:
    waiter = Waiter(
        "PyTorchJob",
        "j",
        "ns",
        settings or Settings(),
        uid="u1",
        timeout=timeout,
        until=finished,
        clock=server.clock,
        **kwargs,
    )
    return lambda: server.drive(Run(wait(waiter, (10.0, 60.0))))


def test_a_watch_event_that_finishes_the_job_ends_the_wait() -> None:
    server = Server([listed(job("5"), "7")], [[line("MODIFIED", job("8")), line("MODIFIED", job("9", done=True))]])
    assert waiting(server)()["metadata"]["resourceVersion"] == "9"
    assert server.log == ["list", "watch from 7"]


def test_410_lists_again_at_once_and_a_second_410_backs_off() -> None:
    done = job("30", done=True)
    server = Server(
        [listed(job("5"), "7"), listed(job("5"), "20"), listed(job("5"), "25")],
        [Gone(), [line("ERROR", {"code": 410, "message": "too old"})], [line("MODIFIED", done)]],
    )
    assert waiting(server)() == done
    assert server.log == ["list", "watch from 7", "list", "watch from 20", "sleep 0.5", "list", "watch from 25"]


def test_bookmarks_move_the_cursor_and_a_watch_ended_by_the_server_continues_from_it() -> None:
    bookmark = json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}})
    server = Server([listed(job("5"), "7")], [[bookmark], [line("MODIFIED", job("13", done=True))]])
    waiting(server)()
    assert server.log == ["list", "watch from 7", "watch from 12"]


def test_dropped_connections_back_off_doubling_up_to_the_poll_interval() -> None:
    drop = Transient(0, "connection reset")
    server = Server(
        [listed(job("5"), "7"), drop, drop, drop, drop, listed(job("6", done=True), "9")],
        [[drop]],
    )
    waiting(server)()
    sleeps = [entry for entry in server.log if entry.startswith("sleep")]
    assert sleeps == ["sleep 0.5", "sleep 1", "sleep 2", "sleep 4", "sleep 4"]


def test_a_server_that_cannot_watch_is_polled_from_then_on() -> None:
    settings = Settings()
    server = Server(
        [listed(job("5"), "7"), listed(job("5"), "7"), listed(job("6", done=True), "8")],
        [api_error(405, "watch not allowed")],
    )
    waiting(server, settings)()
    assert server.log == ["list", "watch from 7", "sleep 0.5", "list", "sleep 4", "list"]
    assert settings.can_watch is False


def test_the_deadline_raises_with_the_last_seen_object() -> None:
    server = Server([listed(job("5"), "7")] * 3)
    wait_for = waiting(server, Settings(watch_timeout=60, can_watch=False), timeout=6)
    with pytest.raises(WaitTimeout) as info:
        wait_for()
    assert info.value.last is not None and info.value.last["metadata"]["resourceVersion"] == "5"
    assert info.value.timeout == 6
    assert server.log == ["list", "sleep 4", "list", "sleep 2", "list"]


def test_deleted_or_replaced_objects_end_the_wait() -> None:
    with pytest.raises(JobDeleted, match="was deleted"):
        waiting(Server([listed(job("5"), "7")], [[line("DELETED", job("8"))]]))()
    with pytest.raises(JobDeleted, match="replaced"):
        waiting(Server([listed(job("5"), "7")], [[line("MODIFIED", job("8", uid="u2"))]]))()
    with pytest.raises(JobDeleted, match="replaced"):
        waiting(Server([listed(job("5", uid="u2"), "7")]))()


def test_errors_that_are_not_transient_are_raised_typed() -> None:
    with pytest.raises(Forbidden):
        waiting(Server([listed(job("5"), "7"), api_error(403, "no")], [Transient(503, "busy")]))()
    with pytest.raises(NotFound):  # the first read fails: there is nothing to wait for
        waiting(Server([api_error(404, "no such resource")]))()


def test_on_change_sees_each_new_version_once() -> None:
    seen: list[str] = []
    server = Server(
        [listed(job("5"), "7"), listed(job("5"), "20")],
        [Gone(), [line("MODIFIED", job("21", done=True))]],
    )
    waiting(server, on_change=lambda obj: seen.append(obj["metadata"]["resourceVersion"]))()
    assert seen == ["5", "5", "21"]
