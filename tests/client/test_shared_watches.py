"""Shared watches (``client/informer.py``) against the embedded API server, counted from its side
(``/metrics``): one watch for many subscribers, subscribers that leave, the last one closing the
watch, and a connection lost long enough for a 410 — after which nothing that happened is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_provider_training.client import AsyncTrainingJobClient, job_state
from airflow_provider_training.client.informer import Informers
from airflow_provider_training.embedded import ControlPlane, start, stop
from tests.apimetrics import open_watches, requests, scrape
from tests.factories import simple_job as job
from tests.fixtures.control_plane import FAST_SETTINGS
from tests.fixtures.job_driver import JobDriver
from tests.waiting import wait_for_async

KIND = "PyTorchJob"


def connector(
    kubeconfig: Path | str, backoff: float = 0.05
) -> Callable[[], contextlib.AbstractAsyncContextManager[AsyncTrainingJobClient]]:
    @contextlib.asynccontextmanager
    async def connect() -> AsyncIterator[AsyncTrainingJobClient]:
        from kubernetes_asyncio import client, config

        configuration = client.Configuration()
        await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        async with client.ApiClient(configuration) as api:
            yield AsyncTrainingJobClient(api, watch_timeout=30, poll_interval=max(0.5, backoff), backoff=backoff)

    return connect


def _sync_api(kubeconfig: Path | str) -> Any:
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


def test_subscribers_share_one_watch_and_the_last_one_leaving_closes_it(
    control_plane: ControlPlane, kube_api: Any, test_namespace: str
) -> None:
    kubeconfig = control_plane.kubeconfig
    driver = JobDriver(kube_api, Path(control_plane.home))
    for name in ("a", "b"):
        driver.custom.create_namespaced_custom_object(
            "kubeflow.org", "v1", test_namespace, "pytorchjobs", job(name=name)
        )
    informers = Informers(linger=0.5)
    connect = connector(kubeconfig)
    baseline = open_watches(kubeconfig, "pytorchjobs")

    async def scenario() -> None:
        async with contextlib.AsyncExitStack() as stack:
            first = await stack.enter_async_context(informers.subscribe("c", connect, KIND, test_namespace, name="a"))
            others = contextlib.AsyncExitStack()
            second = await others.enter_async_context(informers.subscribe("c", connect, KIND, test_namespace, name="b"))
            everything = await others.enter_async_context(informers.subscribe("c", connect, KIND, test_namespace))
            await first.synced()
            assert (await first.get())[1]["metadata"]["name"] == "a"  # the current object, as ADDED
            assert {(await everything.get())[1]["metadata"]["name"] for _ in range(2)} == {"a", "b"}
            await wait_for_async(lambda: open_watches(kubeconfig, "pytorchjobs") == baseline + 1, 20, "one watch")

            await others.aclose()  # two of three leave: the first still hears its job
            await asyncio.to_thread(driver.succeed, KIND, "a", test_namespace)
            while True:
                _, obj = await asyncio.wait_for(first.get(), 20)
                if job_state(obj).succeeded:
                    break
            assert open_watches(kubeconfig, "pytorchjobs") == baseline + 1
            assert second.informer is first.informer and len(informers.running()) == 1
        # the last one left: the watch closes after the linger, and the informer is gone
        await wait_for_async(lambda: open_watches(kubeconfig, "pytorchjobs") == baseline, 20, "the watch to close")
        assert informers.running() == {}
        # a new subscriber starts a new watch
        async with informers.subscribe("c", connect, KIND, test_namespace, name="b") as again:
            await again.synced()
            assert again.current() is not None
            await wait_for_async(lambda: open_watches(kubeconfig, "pytorchjobs") == baseline + 1, 20, "a new watch")

    asyncio.run(asyncio.wait_for(scenario(), 90))


def test_an_unknown_kind_or_a_refused_connection_reaches_every_subscriber(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A kind the client does not know fails in the caller; a cluster that refuses the credentials
    fails every subscriber's wait with the server's answer, and the next subscriber starts afresh."""
    from airflow_provider_training.client.errors import Forbidden

    config = yaml.safe_load(Path(control_plane.kubeconfig).read_text())
    config["users"][0]["user"]["token"] = "not-the-token"
    bad = tmp_path / "kubeconfig"
    bad.write_text(yaml.safe_dump(config))
    informers = Informers(linger=0)

    async def scenario() -> None:
        with pytest.raises(ValueError, match="unknown kind 'Secret'"):
            async with informers.subscribe("bad", connector(bad), "Secret", "default"):
                pass
        waits = [informers.wait("bad", connector(bad), KIND, f"j{i}", "default", timeout=30) for i in range(3)]
        results = await asyncio.gather(*waits, return_exceptions=True)
        assert all(isinstance(r, Forbidden) and r.status == 401 for r in results), results
        assert informers.running() == {}

    asyncio.run(asyncio.wait_for(scenario(), 60))


# -- a lost connection, long enough for the server's history to move on: 410, relist, nothing lost -------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Relay:
    """A TCP relay in front of the API server that can be cut (every connection closed, new ones
    refused) and restored: a network outage between client and server, TLS untouched."""

    def __init__(self, target_port: int) -> None:
        self.target_port, self.port = target_port, _free_port()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))  # SO_REUSEADDR: the port again at once
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, []
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.fixture(scope="module")
def short_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Relay, Path]]:
    """A control plane that keeps 5 events of history, and a kubeconfig that reaches it through a relay."""
    home = tmp_path_factory.mktemp("short-history")
    port = _free_port()
    plane = start(home, port=port, env={**FAST_SETTINGS, "AIRFLOW_TRAINING_EVENT_RETENTION": "5"})
    relay = Relay(port)
    config = yaml.safe_load(Path(plane.kubeconfig).read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    relayed = home / "relayed-kubeconfig"
    relayed.write_text(yaml.safe_dump(config))
    try:
        yield plane, relay, relayed
    finally:
        relay.cut()
        stop(home)


def test_a_410_after_a_lost_connection_relists_and_no_change_is_lost(
    short_history: tuple[ControlPlane, Relay, Path],
) -> None:
    plane, relay, relayed = short_history
    driver = JobDriver(_sync_api(plane.kubeconfig), Path(plane.home))
    create = driver.custom.create_namespaced_custom_object
    for name in ("finishes", "deleted", "stays"):
        create("kubeflow.org", "v1", "default", "pytorchjobs", job(name=name))
    informers = Informers(linger=0)
    connect = connector(relayed)
    gone_before = _watch_410s(plane.kubeconfig)

    async def scenario() -> None:
        seen: list[tuple[str, str]] = []
        async with informers.subscribe(
            "relayed", connect, KIND, "default", deliver=lambda t, o: seen.append((t, o["metadata"]["name"]))
        ) as everything:
            waiting = asyncio.create_task(informers.wait("relayed", connect, KIND, "finishes", "default", timeout=60))
            await everything.synced()
            await wait_for_async(lambda: open_watches(plane.kubeconfig, "pytorchjobs") == 1, 20, "the watch")
            assert not waiting.done()

            relay.cut()  # the network goes; meanwhile the jobs change and the history moves on
            await wait_for_async(lambda: open_watches(plane.kubeconfig, "pytorchjobs") == 0, 20, "the watch to drop")
            await asyncio.to_thread(driver.succeed, KIND, "finishes", "default")
            await asyncio.to_thread(driver.custom.delete_namespaced_custom_object,
                                    "kubeflow.org", "v1", "default", "pytorchjobs", "deleted")  # fmt: skip
            await asyncio.to_thread(create, "kubeflow.org", "v1", "default", "pytorchjobs", job(name="new"))
            for i in range(12):
                await asyncio.to_thread(
                    driver.core.create_namespaced_config_map, "default", {"metadata": {"name": f"churn-{i}"}}
                )
            relay.restore()

            done = await asyncio.wait_for(waiting, 30)
            assert job_state(done).succeeded
            await wait_for_async(
                lambda: {("DELETED", "deleted"), ("ADDED", "new")} <= set(seen), 20, "the relist's news"
            )
            assert ("DELETED", "stays") not in seen
            assert sorted(everything.objects) == ["finishes", "new", "stays"]
        # the server answered the resumed watch with 410: the relist, not the resume, brought the news
        assert _watch_410s(plane.kubeconfig) > gone_before

    asyncio.run(asyncio.wait_for(scenario(), 120))


def _watch_410s(kubeconfig: Path | str) -> float:
    return sum(
        s.value
        for s in scrape(kubeconfig)
        if s.name == "apiserver_request_total" and s.labels.get("verb") == "WATCH" and s.labels.get("code") == "410"
    )


def test_metrics_need_the_credentials_and_count_from_the_server_side(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """``/metrics`` answers the control plane's credentials only (401 otherwise, as any request); a LIST
    is counted once."""
    import ssl
    import urllib.error
    import urllib.request

    before = requests(control_plane.kubeconfig)
    from kubernetes import client

    client.CoreV1Api(_sync_api(control_plane.kubeconfig)).list_namespaced_pod("default")
    assert requests(control_plane.kubeconfig) == before + 1
    context = ssl.create_default_context(cafile=str(control_plane.ca))
    for token in ("", "x" * 100_000, "nonsense\xff\xfe"):
        request = urllib.request.Request(f"{control_plane.api_url}/metrics")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, context=context, timeout=30)
        assert refused.value.code in (401, 431)  # an oversized header is refused before any handler


def test_a_wait_for_a_namesake_the_shared_watch_has_not_seen_yet(
    short_history: tuple[ControlPlane, Relay, Path],
) -> None:
    """A retry replaced the job (same name, new uid) while the shared watch was reconnecting: the
    wait for the new one reads it, and the old one's deletion, arriving late, is not taken for its."""
    plane, relay, relayed = short_history
    driver = JobDriver(_sync_api(plane.kubeconfig), Path(plane.home))
    custom = driver.custom
    custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", job(name="retried"))
    informers = Informers(linger=0)
    connect = connector(relayed, backoff=5.0)  # a long pause before the watch resumes: the window

    async def scenario() -> dict[str, Any]:
        async with informers.subscribe("slow", connect, KIND, "default") as everything:
            await everything.synced()
            assert everything.objects["retried"]["metadata"]["uid"]
            await wait_for_async(lambda: open_watches(plane.kubeconfig, "pytorchjobs") == 1, 20, "the watch")
            relay.cut()
            await asyncio.to_thread(custom.delete_namespaced_custom_object,
                                    "kubeflow.org", "v1", "default", "pytorchjobs", "retried")  # fmt: skip
            created = await asyncio.to_thread(custom.create_namespaced_custom_object,
                                              "kubeflow.org", "v1", "default", "pytorchjobs", job(name="retried"))  # fmt: skip
            relay.restore()
            uid = created["metadata"]["uid"]
            assert everything.objects["retried"]["metadata"]["uid"] != uid  # the watch has not caught up
            waiting = asyncio.create_task(informers.wait("slow", connect, KIND, "retried", "default", uid=uid))
            await wait_for_async(
                lambda: everything.objects["retried"]["metadata"]["uid"] == uid, 20, "the watch to catch up"
            )
            await asyncio.sleep(0.5)
            assert not waiting.done()  # the old one's DELETED did not end it
            await asyncio.to_thread(driver.succeed, KIND, "retried", "default")
            return dict(await asyncio.wait_for(waiting, 30))

    done = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert job_state(done).succeeded
