"""Addresses and ports of the embedded node: one loopback address per pod, ports allocated so that
concurrent jobs never collide, and an :class:`Addressing` that renders them into the environment
the frameworks inject (MASTER_ADDR, TF_CONFIG, hostfiles, rendezvous endpoints).

Every pod gets its own address in 127.0.0.0/8 (``127.1.0.1``, ``127.1.0.2``…), used wherever the
operator would use ``{job}-{type}-{i}``. Where 127/8 is not routable beyond 127.0.0.1 (macOS), every
pod gets 127.0.0.1 and only the allocated ports keep replicas apart. Ports declared on a container
(``pytorchjob-port: 23456``, TF's 2222) are replaced by free ports chosen per replica, the same
value everywhere it appears. Allocations are kept in ``node/network.json`` (a snapshot) and
``node/network.journal`` (one line per change since) so a restarted daemon gives recreated pods the
addresses their peers were told. A change appends a line instead of rewriting the snapshot: a
1,000-pod job rewrote the whole file per pod, a cost that grew with the square of its size.
"""

from __future__ import annotations

import collections
import contextlib
import ipaddress
import json
import os
import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.frameworks.addressing import ReplicaRef

FIRST_POD_ADDRESS = ipaddress.IPv4Address("127.1.0.1")
LOCALHOST = "127.0.0.1"
_FIRST, _LAST = int(FIRST_POD_ADDRESS), int(ipaddress.IPv4Address("127.255.255.254"))


def _address_number(address: str) -> int:
    try:
        return int(ipaddress.IPv4Address(address))
    except ValueError:  # hand-edited network.json: never handed out, so never in the way
        return -1


def loopback_routable() -> bool:
    """Whether this host accepts addresses of 127/8 other than 127.0.0.1 (Linux yes, macOS no)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((str(FIRST_POD_ADDRESS), 0))
        except OSError:
            return False
    return True


def _ephemeral_start() -> int:
    """The first port the kernel hands out for outgoing connections and ``bind(port 0)``."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    return 32768  # Linux's default; macOS starts at 49152


def free_port(host: str = LOCALHOST) -> int:
    """A free port *below* the ephemeral range. A replica binds its port some time after it is
    allocated; a port from the ephemeral range could meanwhile become the local port of any
    outgoing connection on the machine, and the replica (a rendezvous store, a parameter server)
    would fail to listen or wait for peers that never come. A port that no socket holds and the
    kernel never picks on its own stays the replica's."""
    end = _ephemeral_start()
    start = max(1024, end - 12000)
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(start, end)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # a crowded range: any free port
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


_COMPACT_AFTER = 4096  # journal lines beyond twice the live entries before the snapshot is rewritten


class Network:
    """Thread-safe allocator; each change is appended to a journal, compacted into the snapshot
    once the journal outgrows the live entries. Every step is O(1) per pod: the ports of a pod and
    the holders of an address are indexed (a scan of every allocation per release made a 20,000-pod
    job's deletion quadratic)."""

    def __init__(self, path: Path, routable: bool | None = None) -> None:
        self.path = path
        self.routable = loopback_routable() if routable is None else routable
        self._lock = threading.Lock()
        self._batching = 0
        self._unsaved = False
        self.hosts: dict[str, str] = {}
        self.ports: dict[str, int] = {}
        self.journal = path.with_suffix(".journal")
        self._pending: list[str] = []
        self._journal_lines = 0
        self._journal_file: IO[str] | None = None
        self._pod_ports: dict[str, set[str]] = {}  # pod key -> its port keys
        self._holders: collections.Counter[str] = collections.Counter()  # address -> keys holding it
        self._port_holders: collections.Counter[int] = collections.Counter()  # port -> keys holding it
        with contextlib.suppress(OSError, ValueError, AttributeError):
            data = json.loads(path.read_text())
            for key, address in data.get("hosts", {}).items():
                self._set_host(str(key), str(address))
            for key, number in data.get("ports", {}).items():
                self._set_port(str(key), int(number))
        self._replay()
        self._used = {_address_number(a) for a in self._holders}
        # the next address to try: after the newest, so an address given back is not handed out
        # again at once (a peer may still be told it), and an allocation does not scan every
        # address in use
        self._next = max(self._used, default=_FIRST - 1) + 1

    # -- the indexed maps (called with the lock held, or before the allocator is shared) --------
    def _set_host(self, key: str, address: str) -> None:
        old = self.hosts.get(key)
        if old is not None:
            self._drop_holder(old)
        self.hosts[key] = address
        self._holders[address] += 1

    def _drop_holder(self, address: str) -> bool:
        """One key fewer holds ``address``; True when none does any more."""
        self._holders[address] -= 1
        if self._holders[address] > 0:
            return False
        del self._holders[address]
        return True

    def _set_port(self, key: str, number: int) -> None:
        old = self.ports.get(key)
        if old is not None:
            self._drop_port(old)
        self.ports[key] = number
        self._port_holders[number] += 1
        self._pod_ports.setdefault(_pod_of(key), set()).add(key)

    def _drop_port(self, number: int) -> None:
        self._port_holders[number] -= 1
        if self._port_holders[number] <= 0:
            del self._port_holders[number]

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Allocations made inside are persisted once, when the outermost batch ends."""
        with self._lock:
            self._batching += 1
        try:
            yield
        finally:
            with self._lock:
                self._batching -= 1
                if not self._batching and self._unsaved:
                    self._save()

    def _replay(self) -> None:
        with contextlib.suppress(OSError):
            for line in self.journal.read_text().splitlines():
                self._journal_lines += 1
                with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
                    change = json.loads(line)
                    if "host" in change:
                        self._set_host(str(change["host"]), str(change["address"]))
                    elif "port" in change:
                        self._set_port(str(change["port"]), int(change["number"]))
                    elif "release" in change:
                        self._forget(str(change["release"]))

    def _forget(self, key: str) -> str | None:
        """Drop a pod's address and ports; returns the address when no other key holds it."""
        address = self.hosts.pop(key, None)
        for port_key in self._pod_ports.pop(key, ()):
            number = self.ports.pop(port_key, None)
            if number is not None:
                self._drop_port(number)
        if address is not None and self._drop_holder(address):
            return address
        return None

    def _record(self, change: dict[str, object]) -> None:
        """(called with the lock held)"""
        self._pending.append(json.dumps(change) + "\n")
        self._save()

    def _save(self) -> None:
        """(called with the lock held)"""
        if self._batching:
            self._unsaved = True
            return
        self._unsaved = False
        if self._journal_lines + len(self._pending) > 2 * (len(self.hosts) + len(self.ports)) + _COMPACT_AFTER:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"hosts": self.hosts, "ports": self.ports}))
            os.replace(tmp, self.path)
            if self._journal_file is not None:
                self._journal_file.close()
                self._journal_file = None
            self.journal.unlink(missing_ok=True)  # the snapshot already holds every change in it
            self._journal_lines = 0
        elif self._pending:
            if self._journal_file is None:  # kept open: a line per pod, not an open and close per pod
                self._journal_file = self.journal.open("a")
            self._journal_file.writelines(self._pending)
            self._journal_file.flush()
            self._journal_lines += len(self._pending)
        self._pending.clear()

    def pod_address(self, namespace: str, pod: str) -> str:
        if not self.routable:
            return LOCALHOST
        key = f"{namespace}/{pod}"
        with self._lock:
            if key in self.hosts:
                return self.hosts[key]
            candidate = self._next
            while candidate in self._used or candidate % 256 in (0, 255) or candidate > _LAST:
                candidate = _FIRST if candidate >= _LAST else candidate + 1
            self._next = candidate + 1
            self._used.add(candidate)
            address = str(ipaddress.IPv4Address(candidate))
            self._set_host(key, address)
            self._record({"host": key, "address": address})
            return address

    def port(self, namespace: str, pod: str, name: str) -> int:
        key = f"{namespace}/{pod}/{name}"
        with self._lock:
            if key in self.ports:
                return self.ports[key]
            port = free_port()
            while port in self._port_holders:
                port = free_port()
            self._set_port(key, port)
            self._record({"port": key, "number": port})
            return port

    def assign(self, namespace: str, pod: str, address: str) -> None:
        """Give ``pod`` an address reserved earlier under another key (an Indexed Job's pod gets the
        one its hostname was given, so peers told the hostname reach it)."""
        if not self.routable:
            return
        key = f"{namespace}/{pod}"
        with self._lock:
            old = self.hosts.get(key)
            self._set_host(key, address)
            self._used.add(_address_number(address))
            if old is not None and old not in self._holders:
                self._used.discard(_address_number(old))
            self._record({"host": key, "address": address})

    def release_pod(self, namespace: str, pod: str) -> None:
        """Forget a pod's address and ports (its job is gone)."""
        key = f"{namespace}/{pod}"
        with self._lock:
            if key not in self.hosts and key not in self._pod_ports:
                return  # never given anything (a suspended job's 20,000 hostnames): nothing to write
            address = self._forget(key)
            if address is not None:
                self._used.discard(_address_number(address))
            self._record({"release": key})


def _pod_of(port_key: str) -> str:
    """``namespace/pod`` of a port key ``namespace/pod/name`` (neither a namespace nor a pod's
    name holds a slash)."""
    namespace, _, rest = port_key.partition("/")
    return f"{namespace}/{rest.partition('/')[0]}"


class LocalAddressing:
    """The frameworks' :class:`Addressing` for this node."""

    def __init__(self, network: Network) -> None:
        self.network = network

    def host(self, replica: ReplicaRef) -> str:
        return self.network.pod_address(replica.namespace, replica.pod_name)

    def service_host(self, replica: ReplicaRef) -> str:
        return self.host(replica)

    def port(self, replica: ReplicaRef, port_name: str, declared: int) -> int:
        return self.network.port(replica.namespace, replica.pod_name, port_name)


_SHARED: dict[Path, Network] = {}


def shared_network(home: Home) -> Network:
    """The one allocator of a data directory, shared by the job controller and the node agent."""
    key = home.root
    if key not in _SHARED:
        (home.root / "node").mkdir(parents=True, exist_ok=True)
        _SHARED[key] = Network(home.root / "node" / "network.json")
    return _SHARED[key]
