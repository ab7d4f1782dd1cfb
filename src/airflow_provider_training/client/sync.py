"""``TrainingJobClient``: the training jobs (and batch Jobs, InferenceServices) of any kubeconfig,
through the official ``kubernetes`` client.

Waiting is watch-based: one long watch request per ``watch_timeout`` seconds while nothing changes,
continued from the last resourceVersion (bookmarks included), a fresh LIST after ``410 Gone``, and a
LIST after a dropped connection. Where the server cannot watch, the client polls every
``poll_interval`` seconds (``waiting.py`` holds these rules; ``operations.py`` the requests; this
module only answers them with ``kubernetes``).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes.watch.watch import iter_resp_lines

from airflow_provider_training.client import operations as op
from airflow_provider_training.client.errors import translate
from airflow_provider_training.client.following import Follower, follow
from airflow_provider_training.client.logselect import RESUME_LOG_LINES
from airflow_provider_training.client.state import finished
from airflow_provider_training.client.steps import Call, Driver, Run, Sleep, Steps, T, decode
from airflow_provider_training.client.waiting import Predicate, Waiter, wait

Objects = list[dict[str, Any]]  # (the clients have a method called ``list``)


class Stop:
    """Ends a sync follow (or any stream registered with it) from another thread: :meth:`set` wakes
    its sleeps and shuts the sockets of its open streams down, so a blocked read returns at once."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._open: set[Any] = set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        return self._event.wait(seconds)

    def set(self) -> None:
        self._event.set()
        with self._lock:
            streams = list(self._open)
        for response in streams:
            abort(response)

    @contextlib.contextmanager
    def holding(self, response: Any) -> Iterator[None]:
        """While the caller reads ``response``, :meth:`set` aborts it."""
        with self._lock:
            self._open.add(response)
        if self.is_set():
            abort(response)
        try:
            yield
        finally:
            with self._lock:
                self._open.discard(response)


def abort(response: Any) -> None:
    """Unblock a thread reading ``response`` (urllib3): shut its socket down (closing the response
    itself would wait for the reader's buffer lock)."""
    connection = getattr(response, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class TrainingJobClient(Driver):
    """Create, get, list, delete and wait for jobs; their pods, logs and events.

    ``api_client`` is a configured ``kubernetes.client.ApiClient`` (the hooks build one from an
    Airflow connection or the embedded control plane's kubeconfig). API failures are raised as the
    typed errors of ``client.errors`` (``NotFound``, ``Conflict``, ``Transient`` …).
    """

    custom_api = k8s.CustomObjectsApi
    core_api = k8s.CoreV1Api

    # -- the driver: answers an operation's requests with ``kubernetes`` ---------------------------
    def _drive(self, steps: Steps[T], stop: Stop | None = None) -> T:
        run = Run(steps)
        stop = stop or Stop()  # never set: sleeps run their time
        while (request := run.request) is not None:
            with run.answering():
                if isinstance(request, Sleep):
                    stop.wait(request.seconds)
                    run.send(None)
                elif isinstance(request, Call) and request.read == "stream":
                    self._stream(run, request, stop)
                else:
                    run.send(self._call(request))  # type: ignore[arg-type]
        return run.result()

    def _call(self, call: Call) -> Any:
        response = getattr(self._api(call), call.method)(*call.args, **call.options())
        return response if call.read in ("object", "stream") else decode(call, response.data)

    def _stream(self, run: Run[Any], call: Call, stop: Stop) -> None:
        response = self._call(call)
        try:
            with stop.holding(response):
                for line in iter_resp_lines(response):
                    if not run.feed(line):
                        return
                run.feed(None)
        finally:
            response.release_conn()

    # -- objects -----------------------------------------------------------------------------------
    def create(self, body: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Create ``body`` (a job document as a dict); returns the stored object with its uid."""
        return self._drive(op.create(body, namespace, self._timeout))

    def find(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        return self._drive(op.find(kind, name, namespace, self._timeout))

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        """The object; :class:`JobNotFound` when there is none."""
        return self._drive(op.get(kind, name, namespace, self._timeout))

    def list(self, kind: str, namespace: str, label_selector: str | None = None) -> Objects:
        return self._drive(op.list_(kind, namespace, label_selector, self._timeout))

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Write ``body`` over the stored object (read it first: its resourceVersion must be current)."""
        return self._drive(op.replace(body, self._timeout))

    def apply_secret(self, body: Mapping[str, Any]) -> None:
        """Create the Secret ``body`` or replace the one of that name."""
        self._drive(op.apply_secret(body, self._timeout))

    def patch_labels(self, kind: str, name: str, namespace: str, labels: Mapping[str, str | None]) -> dict[str, Any]:
        return self._drive(op.patch_labels(kind, name, namespace, labels, self._timeout))

    def delete(
        self, kind: str, name: str, namespace: str, *, propagation: str = "Foreground", uid: str | None = None
    ) -> bool:
        """Delete the job and (by ``propagation``) its pods. ``uid`` makes sure it is *that* job.
        Returns False when there was nothing to delete."""
        return self._drive(op.delete(kind, name, namespace, propagation, uid, self._timeout))

    def wait(
        self,
        kind: str,
        name: str,
        namespace: str,
        *,
        uid: str | None = None,
        timeout: float | None = None,
        until: Predicate = finished,
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Block until ``until(job)`` holds (default: finished) and return the job.

        Raises :class:`WaitTimeout` after ``timeout`` seconds, :class:`JobDeleted` if the job
        disappears or its uid is no longer ``uid``.
        """
        waiter = Waiter(kind, name, namespace, self, uid=uid, timeout=timeout, until=until, on_change=on_change)
        return self._drive(wait(waiter, self._timeout))

    def follow(self, follower: Follower, stop: Stop | None = None) -> None:
        """Hand every change of ``follower``'s objects to its ``on_event`` (``following.py``: list,
        watch, resume, relist after 410), in this thread, until ``stop`` is set — from another
        thread: its open watch is aborted. Raises what retrying will not change (403, …)."""
        if stop is not None:
            follower.stopped = stop.is_set
        self._drive(follow(follower, self._timeout), stop)

    # -- pods, logs, events ------------------------------------------------------------------------
    def pods(
        self,
        kind: str,
        name: str,
        namespace: str,
        *,
        uid: str | None = None,
        replica_type: str | None = None,
        index: int | None = None,
    ) -> Objects:
        """The job's pods (for a training job: by replica type and index), sorted by name."""
        return self._drive(op.pods(kind, name, namespace, uid, replica_type, index, self._timeout))

    def find_pod(self, name: str, namespace: str) -> dict[str, Any] | None:
        return self._drive(op.find_pod(name, namespace, self._timeout))

    def list_pods(self, namespace: str, label_selector: str) -> Objects:
        """Pods by label selector, whoever owns them (an InferenceService's predictor pods)."""
        return self._drive(op.list_pods(namespace, label_selector, self._timeout))

    def read_log(
        self,
        pod: str,
        namespace: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        return self._drive(op.read_log(pod, namespace, container, tail_lines, previous, self._timeout))

    def stream_log(self, pod: str, namespace: str, *, container: str | None = None) -> Any:
        """An open ``follow=true`` log response (urllib3); read it with ``iter_resp_lines``."""
        kwargs = op.log_options(container, None, follow=True)
        with translate():
            return self.core.read_namespaced_pod_log(
                pod, namespace, _preload_content=False, _request_timeout=(10.0, None), **kwargs
            )

    def replica_logs(
        self,
        kind: str,
        name: str,
        namespace: str,
        *,
        uid: str | None = None,
        select: Callable[[dict[str, Any]], bool],
        tail_lines: int | None = RESUME_LOG_LINES,
    ) -> op.Logs:
        """``(pod, last lines)`` of the job's pods ``select`` accepts (a note where a log is not available)."""
        return self._drive(op.replica_logs(kind, name, namespace, uid, select, tail_lines, self._timeout))

    def events(self, kind: str, name: str, namespace: str, *, uid: str | None = None) -> Objects:
        """Events of the job and of its pods, oldest first."""
        return self._drive(op.events(kind, name, namespace, uid, self._timeout))
