"""The pods' address and port allocator: allocations survive a restart (read back from the file),
never collide, and a batch of them is written once, when the batch ends."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_provider_training.embedded.network import Network


def test_allocations_are_kept_distinct_and_read_back_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "network.json"
    network = Network(path, routable=True)
    a, b = network.pod_address("ns", "a"), network.pod_address("ns", "b")
    port = network.port("ns", "a", "pytorchjob-port")
    assert a != b and network.pod_address("ns", "a") == a
    again = Network(path, routable=True)
    assert (again.pod_address("ns", "a"), again.pod_address("ns", "b"), again.port("ns", "a", "pytorchjob-port")) == (
        a,
        b,
        port,
    )
    assert again.pod_address("ns", "c") not in (a, b)


def test_a_batch_of_allocations_is_written_once_at_its_end(tmp_path: Path) -> None:
    path = tmp_path / "network.json"
    network = Network(path, routable=True)
    with network.batch():
        with network.batch():
            first = network.pod_address("ns", "a")
        network.pod_address("ns", "b")
        assert not path.exists() and not network.journal.exists()  # nothing written while the batch lasts
    assert Network(path, routable=True).hosts == {"ns/a": first, "ns/b": network.pod_address("ns", "b")}
    network.release_pod("ns", "a")
    assert "ns/a" not in Network(path, routable=True).hosts


def test_allocating_and_releasing_many_pods_costs_linear_time_and_survives_a_restart(tmp_path: Path) -> None:
    """A 1,000-node job's bookkeeping once rewrote all of network.json per pod (quadratic)."""
    import time

    path = tmp_path / "network.json"
    network = Network(path, routable=True)
    started = time.monotonic()
    for i in range(3000):
        network.pod_address("ns", f"p{i}")
        network.port("ns", f"p{i}", "master")
    kept = {f"ns/p{i}": network.hosts[f"ns/p{i}"] for i in range(2000, 3000)}
    for i in range(2000):
        network.release_pod("ns", f"p{i}")
    elapsed = time.monotonic() - started
    again = Network(path, routable=True)
    assert again.hosts == kept
    assert len(again.ports) == 1000
    assert elapsed < 3.0, f"3,000 pods' bookkeeping took {elapsed:.1f} s"


def test_replica_ports_come_from_below_the_ephemeral_range_and_are_free(tmp_path: Path) -> None:
    """The kernel never picks these for outgoing connections, so a port stays the replica's between
    its allocation and the replica binding it."""
    import socket

    from airflow_provider_training.embedded.network import _ephemeral_start

    network = Network(tmp_path / "network.json", routable=True)
    ports = {network.port("ns", f"p{i}", "pytorchjob-port") for i in range(50)}
    assert len(ports) == 50 and all(1024 <= p < _ephemeral_start() for p in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", next(iter(ports))))  # not held by anything


def test_an_address_given_back_is_not_handed_out_again_at_once(tmp_path: Path) -> None:
    network = Network(tmp_path / "network.json", routable=True)
    a, b = network.pod_address("ns", "a"), network.pod_address("ns", "b")
    network.release_pod("ns", "a")
    c = network.pod_address("ns", "c")
    assert c not in (a, b)  # a peer of the deleted pod may still be told ``a``
    assert all(int(x.split(".")[-1]) not in (0, 255) for x in (a, b, c))


def test_allocation_wraps_around_past_the_last_address(tmp_path: Path) -> None:
    path = tmp_path / "network.json"
    path.write_text(json.dumps({"hosts": {"ns/first": "127.1.0.1", "ns/last": "127.255.255.254"}, "ports": {}}))
    network = Network(path, routable=True)
    assert network.pod_address("ns", "new") == "127.1.0.2"  # past the end: from the start, skipping what is held


def test_every_pod_hostname_in_a_jobsets_text_becomes_its_address(tmp_path: Path) -> None:
    """A hostfile lists the nodes one a line: in the JSON text a name follows ``\\n`` (a letter to a
    scan for names), and the second node stayed ``mpi-node-0-1.mpi``, unresolvable, so mpirun's
    exec into it failed. Every name is replaced; a name of no pod of the JobSet is left alone."""
    from airflow_provider_training.embedded.controllers.jobset import address_key, localize

    network = Network(tmp_path / "network.json", routable=True)
    jobset = {
        "metadata": {"name": "mpi", "namespace": "ns"},
        "spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {"parallelism": 12}}}]},
    }
    hostfile = "".join(f"mpi-node-0-{i}.mpi slots=1\n" for i in range(12)) + "xmpi-node-0-99.mpi other.mpi\n"
    localized = localize({"hostfile": hostfile}, jobset, network)["hostfile"].splitlines()
    for i in range(12):
        assert localized[i] == f"{network.pod_address('ns', address_key(f'mpi-node-0-{i}'))} slots=1"
    assert localized[12] == "xmpi-node-0-99.mpi other.mpi"
