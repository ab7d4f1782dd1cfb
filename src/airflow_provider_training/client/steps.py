"""Client operations written once, as generators of requests (no I/O here).

Every operation of the clients (create, get, list, delete, pods, logs, events, wait) is a generator
that yields what it needs done — a :class:`Call` of the official client's API, a :class:`Sleep` —
and receives the answer; the sync client answers with ``kubernetes``, the async one with
``kubernetes_asyncio`` (``sync.py``, ``aio.py``: thin drivers). A failed call is thrown back into the
generator as a typed error (``errors.py``), so the operations catch ``NotFound`` rather than test
statuses.

A watch is a :class:`Call` with ``read="stream"``: the driver opens it and sends the stream's lines
one by one, answering each :data:`READ_ON` with the next line and ``None`` at the end of the stream;
any other request from the generator closes the stream first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from airflow_provider_training.client.errors import typed

T = TypeVar("T")
Read = Literal["object", "json", "text", "stream"]


@dataclass(frozen=True)
class Call:
    """``api.method(*args, **kwargs)`` on ``CustomObjectsApi`` (``api="custom"``) or ``CoreV1Api``.

    ``read``: ``object`` (the client decodes), ``json`` / ``text`` (the raw body, decoded here),
    ``stream`` (an open response, read line by line)."""

    api: Literal["custom", "core"]
    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    read: Read = "object"

    def options(self) -> dict[str, Any]:
        raw = {} if self.read == "object" else {"_preload_content": False}
        return {**self.kwargs, **raw}


@dataclass(frozen=True)
class Sleep:
    seconds: float


class ReadOn:
    """Asks the driver for the next line of the open stream."""


READ_ON = ReadOn()
Request = Call | Sleep | ReadOn
Steps = Generator[Request, Any, T]


class Run(Generic[T]):
    """Drives one operation's generator: ``request`` is what it asks for next (None once it is done)."""

    def __init__(self, steps: Steps[T]) -> None:
        self.steps = steps
        self.request: Request | None = None
        self.value: T | None = None
        self.error: BaseException | None = None
        self.send(None)

    def send(self, answer: Any) -> None:
        self._resume(self.steps.send, answer)

    def throw(self, error: BaseException) -> None:
        self._resume(self.steps.throw, error)

    def _resume(self, how: Any, arg: Any) -> None:
        try:
            self.request = how(arg)
        except StopIteration as stop:
            self.request, self.value = None, stop.value
        except Exception as exc:  # the operation's own outcome (JobDeleted, WaitTimeout, ...): kept for result()
            self.request, self.error = None, exc

    def feed(self, line: str | bytes | None) -> bool:
        """Send one line of a stream (None: it ended); True while the operation wants the next."""
        self.send(line)
        return self.request is READ_ON

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """Around the driver's I/O: a failure to talk to the server goes into the operation as a typed error."""
        try:
            yield
        except Exception as exc:  # narrowed by ``typed``; what it does not know is a bug, re-raised
            error = typed(exc)
            if error is None:
                raise
            if error is not exc:
                error.__cause__ = exc
            self.throw(error)

    def result(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


class Driver:
    """What both clients hold: the official client's API objects and the waiting settings."""

    custom_api: type[Any]  # CustomObjectsApi of the official client the subclass drives
    core_api: type[Any]

    def __init__(
        self,
        api_client: Any,
        *,
        watch_timeout: float = 240.0,
        poll_interval: float = 10.0,
        request_timeout: float = 60.0,
        backoff: float = 0.5,
    ) -> None:
        """``backoff``: the first pause before a follow resumes after a dropped connection (doubling
        up to ``poll_interval``); tests make it small."""
        self.api_client = api_client
        self.backoff = backoff
        self.custom = self.custom_api(api_client)
        self.core = self.core_api(api_client)
        self.watch_timeout = watch_timeout
        self.poll_interval = poll_interval
        self.request_timeout = request_timeout
        self.can_watch = True  # cleared for good when the server answers a watch with 400/404/405/501

    @property
    def _timeout(self) -> tuple[float, float]:
        return (10.0, self.request_timeout)

    def _api(self, call: Call) -> Any:
        return self.custom if call.api == "custom" else self.core


def decode(call: Call, body: bytes) -> Any:
    """A raw answer's body as the call wants it."""
    import json

    return json.loads(body) if call.read == "json" else body.decode("utf-8", "replace")


# -- the calls -------------------------------------------------------------------------------------


def custom(method: str, *args: Any, read: Read = "object", **kwargs: Any) -> Call:
    return Call("custom", method, args, kwargs, read)


def core(method: str, *args: Any, read: Read = "object", **kwargs: Any) -> Call:
    return Call("core", method, args, kwargs, read)
