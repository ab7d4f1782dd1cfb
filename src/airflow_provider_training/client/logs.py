"""Following replica logs while a job runs, each line prefixed with its replica (pod) name.

A pod watch (one long request, not a poll) notices replicas as they start and restart; each started
container gets a thread that follows its log. The waiter polls the job's status on its own, so a
stalled log stream never delays the end of the wait: ``stop()`` gives streams a moment to drain and
then closes them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes.watch.watch import iter_resp_lines

from airflow_provider_training.client.errors import ApiError
from airflow_provider_training.client.following import Follower
from airflow_provider_training.client.logselect import PodFilter
from airflow_provider_training.client.resources import resource_for
from airflow_provider_training.client.selection import pod_selector
from airflow_provider_training.client.state import container_started, main_container, owned_by
from airflow_provider_training.client.sync import Stop, TrainingJobClient, abort

Sink = Callable[[str], None]


class LogFollower:
    """Follow the logs of the job's pods that ``select`` accepts, writing ``[pod] line`` to ``sink``."""

    def __init__(
        self,
        client: TrainingJobClient,
        kind: str,
        name: str,
        namespace: str,
        *,
        sink: Sink,
        select: PodFilter = lambda pod: True,
        uid: str | None = None,
        container: str | None = None,
    ) -> None:
        self.client, self.kind, self.name, self.namespace = client, kind, name, namespace
        self.sink, self.select, self.uid, self.container = sink, select, uid, container
        if kind == "TrainJob":  # its pods are owned by the JobSet's Jobs; the label names the TrainJob
            self.uid = None
        self._stop = Stop()
        self._closed = False
        self._lock = threading.Lock()
        self._followed: dict[str, int] = {}  # pod -> restart count being / already followed
        self._streams: dict[str, Any] = {}
        self._threads: list[threading.Thread] = []
        self._watcher = threading.Thread(target=self._watch_pods, name=f"pods-{name}", daemon=True)
        resource_for(kind)  # fail early on an unknown kind

    def start(self) -> LogFollower:
        self._watcher.start()
        return self

    def stop(self, drain: float = 5.0) -> None:
        """Stop watching; let running streams finish for up to ``drain`` seconds, then close them.
        Replicas the watch had not reached yet (a job that ended right away) are read once too."""
        deadline = time.monotonic() + drain
        self._stop.set()
        # in a thread, within the drain time: an unresponsive server must not hold up stop()
        catch_up = threading.Thread(target=self._catch_up, name=f"catch-up-{self.name}", daemon=True)
        catch_up.start()
        catch_up.join(max(0.0, deadline - time.monotonic()))
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))
        self._closed = True
        with self._lock:
            streams = list(self._streams.values())
        for response in streams:
            abort(response)

    def _catch_up(self) -> None:
        try:
            pods = self.client.pods(self.kind, self.name, self.namespace, uid=self.uid)
        except ApiError:  # the logs are a courtesy: the job's outcome is already known
            return
        for pod in pods:
            if self._closed:  # the answer came after stop() had returned: nothing more to the sink
                return
            self._consider(pod)

    def _watch_pods(self) -> None:
        """The job's pods through the client's follow (``following.py``) until :meth:`stop`."""

        def changed(type_: str, pod: dict[str, Any]) -> None:
            if type_ != "DELETED":
                self._consider(pod)

        follower = Follower(
            "Pod", self.namespace, self.client, on_event=changed, label_selector=pod_selector(self.kind, self.name)
        )
        while not self._stop.is_set():
            try:
                self.client.follow(follower, self._stop)
            except ApiError:  # the logs are a courtesy: try again (a first list that failed, a 403)
                self._stop.wait(min(2.0, self.client.poll_interval))

    def _consider(self, pod: dict[str, Any]) -> None:
        if not owned_by(pod, self.uid) or not self.select(pod):
            return
        container = main_container(pod, self.container)
        started, restarts = container_started(pod, container)
        name = pod["metadata"]["name"]
        with self._lock:
            if not started or self._followed.get(name, -1) >= restarts or name in self._streams:
                return
            self._followed[name] = restarts
        thread = threading.Thread(target=self._follow, args=(name, container), name=f"log-{name}", daemon=True)
        thread.start()  # before it is listed: stop() may join any listed thread ("cannot join … before it is started")
        self._threads.append(thread)

    def _follow(self, pod: str, container: str | None) -> None:
        response = None
        for attempt in range(4):  # a container reported running may not have a log yet
            try:
                response = self.client.stream_log(pod, self.namespace, container=container)
                break
            except ApiError as exc:
                if attempt == 3 or self._stop.wait(0.25 * 2**attempt):
                    self.sink(f"[{pod}] (log not available: {getattr(exc, 'reason', exc)})")
                    with self._lock:
                        self._followed.pop(pod, None)  # the next pod event tries again
                    return
        if response is None:
            return
        with self._lock:
            self._streams[pod] = response
        try:
            for line in iter_resp_lines(response):
                self.sink(f"[{pod}] {line}")
        except Exception:  # closed by stop(), or the connection dropped: the wait goes on regardless
            pass
        finally:
            with self._lock:
                self._streams.pop(pod, None)
            with contextlib.suppress(Exception):
                response.release_conn()
