"""get / list / create latency through the API server with 10,000 stored pods, and watch delivery.

Baselines, measured in the same run: the raw SQLite operation each request ends in (primary-key
read, label-index query, insert + commit on a WAL database), and an authenticated no-op HTTP
request (``GET /version``) for the transport's own share.

Authorization (issue 27: < 0.2 ms p50 added per request): a second daemon on a copy of the same
store runs with ``AIRFLOW_TRAINING_AUTHORIZATION=permissive``; the same requests, with the token of
a service account bound to ``view`` (so RBAC evaluates rules rather than waving ``system:masters``
through), alternate between the RBAC daemon and the permissive one; the difference of the p50s is
what authorization adds. The authorizer's own cost is timed in-process too (authentication, the
request's attributes, the rule check).

The stored pods are bound to another node, so neither daemon runs any of them; both daemons are
stopped with their node's processes and their directories removed in a ``finally``
(``_apiserver_common.cleanup``), and the run ends by saying how many pods the node agents started.

    PYTHONPATH=src python benchmarks/apiserver_latency.py [--objects 10000] [--repeat 300]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from _apiserver_common import (
    GROUP_SIZE,
    N_OBJECTS,
    cleanup,
    exit_on_sigterm,
    percentiles,
    pods_run,
    row,
    seeded_daemon,
    timed,
)

from airflow_provider_training.embedded import ControlPlane, start
from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.store import Store

REPEAT = 300


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=N_OBJECTS, help="stored pods (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=REPEAT, help="requests per measurement (default %(default)s)")
    args = parser.parse_args(argv)
    if args.objects < GROUP_SIZE or args.repeat < 1:
        parser.error(f"--objects must be at least {GROUP_SIZE} and --repeat at least 1")
    exit_on_sigterm()
    homes: list[Path] = []  # every daemon directory this run made, removed with its processes at the end
    try:
        measure(args.objects, args.repeat, homes)
        started = sum(pods_run(home) for home in homes)
        print(
            f"\npods the benchmark's node agents started: {started} (expected 0: the stored pods are bound elsewhere)"
        )
    finally:
        for home in homes:
            cleanup(home)


def measure(n: int, repeat: int, homes: list[Path]) -> None:
    plane = seeded_daemon(n)
    homes.append(Path(plane.home))
    job = f"job{n // GROUP_SIZE // 2}"  # a job label value in the middle of the store
    with httpx.Client(
        base_url=plane.api_url, verify=str(plane.ca), headers={"Authorization": f"Bearer {plane.token}"}, timeout=30
    ) as http:
        db = sqlite3.connect(Path(plane.home) / "store.db")
        pods = "/api/v1/namespaces/default/pods"
        selector = {"labelSelector": f"training.kubeflow.org/job-name={job}"}

        noop = timed(lambda: http.get("/version"), repeat)
        sql_get = timed(
            lambda: db.execute(
                f"SELECT body FROM objects WHERE resource='core/pods' AND namespace='default' AND name='{job}-worker-3'"
            ).fetchone(),
            repeat,
        )
        api_get = timed(lambda: http.get(f"{pods}/{job}-worker-3").raise_for_status(), repeat)
        sql_list = timed(
            lambda: db.execute(
                "SELECT o.body FROM objects o JOIN labels l ON l.resource=o.resource AND l.namespace=o.namespace "
                "AND l.name=o.name WHERE l.resource='core/pods' AND l.key='training.kubeflow.org/job-name' "
                f"AND l.value='{job}'"
            ).fetchall(),
            repeat,
        )
        api_list = timed(lambda: http.get(pods, params=selector).raise_for_status(), repeat)
        assert len(http.get(pods, params=selector).json()["items"]) == 10
        api_list_all = timed(lambda: http.get(pods).raise_for_status(), 10)
        sql_list_all = timed(lambda: db.execute("SELECT body FROM objects WHERE resource='core/pods'").fetchall(), 10)

        baseline_db = sqlite3.connect(Path(plane.home) / "baseline.db", isolation_level=None)
        baseline_db.execute("PRAGMA journal_mode=WAL")
        baseline_db.execute("PRAGMA synchronous=NORMAL")
        baseline_db.execute("CREATE TABLE t (name TEXT PRIMARY KEY, body TEXT)")
        body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v" * 200}})
        counter = iter(range(10**9))

        def sql_insert() -> None:
            baseline_db.execute("BEGIN IMMEDIATE")
            baseline_db.execute("INSERT INTO t VALUES (?, ?)", (f"c{next(counter)}", body))
            baseline_db.execute("COMMIT")

        sql_create = timed(sql_insert, repeat)
        names = iter(range(10**9))
        api_create = timed(
            lambda: http.post(
                "/api/v1/namespaces/default/configmaps",
                json={"metadata": {"name": f"bench-{next(names)}"}, "data": {"k": "v" * 200}},
            ).raise_for_status(),
            repeat,
        )

        # watch delivery: write -> event read by a client on a separate connection
        received: dict[str, float] = {}
        ready = threading.Event()

        def watcher() -> None:
            with (
                httpx.Client(
                    base_url=plane.api_url,
                    verify=str(plane.ca),
                    timeout=None,
                    headers={"Authorization": f"Bearer {plane.token}"},
                ) as w,
                w.stream(
                    "GET",
                    "/api/v1/namespaces/default/configmaps",
                    params={
                        "watch": "true",
                        "resourceVersion": str(
                            http.get("/api/v1/namespaces/default/configmaps", params={"limit": "1"}).json()["metadata"][
                                "resourceVersion"
                            ]
                        ),
                    },
                ) as r,
            ):
                ready.set()
                for line in r.iter_lines():
                    name = json.loads(line)["object"]["metadata"]["name"]
                    received[name] = time.perf_counter()
                    if name == "watch-stop":
                        return

        thread = threading.Thread(target=watcher)
        thread.start()
        ready.wait()
        time.sleep(0.2)
        sent: dict[str, float] = {}
        for i in range(repeat):
            name = f"watch-{i}"
            sent[name] = time.perf_counter()
            http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": name}}).raise_for_status()
            while name not in received:
                time.sleep(0.0001)
        http.post("/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "watch-stop"}})
        thread.join(10)
        delivery = [received[n] - sent[n] for n in sent]

        print(f"API server latency, {n} stored pods, {repeat} requests each (HTTPS, keep-alive)")
        print(row("no-op request (GET /version)", noop))
        print(row("get pod            vs SQLite primary-key read", api_get, sql_get))
        print(row("list, selector = 10 pods vs SQLite index query", api_list, sql_list))
        print(row(f"list all {n:,} pods vs SQLite full scan", api_list_all, sql_list_all))
        print(row("create configmap   vs SQLite insert+commit", api_create, sql_create))
        print(row("watch: write -> event vs SQLite insert+commit", delivery, sql_create))
        _, p99 = percentiles(delivery)
        print(f"watch delivery goal p99 < 20 ms: {'met' if p99 < 0.020 else 'NOT met'} ({p99 * 1000:.2f} ms)")
        print(
            f"get/list(selector) share above the HTTP no-op: p50 get {percentiles(api_get)[0] / percentiles(noop)[0]:.2f}x, "
            f"list {percentiles(api_list)[0] / percentiles(noop)[0]:.2f}x"
        )
        authorization(plane, http, job, repeat, homes)


def authorization(plane: ControlPlane, admin: httpx.Client, job: str, repeat: int, homes: list[Path]) -> None:
    """What RBAC adds to a request: the RBAC daemon against a permissive one on a copy of its store."""
    permissive_home = Path(tempfile.mkdtemp(prefix="apt-bench-permissive-"))
    homes.append(permissive_home)
    with (
        sqlite3.connect(Path(plane.home) / "store.db") as source,
        sqlite3.connect(permissive_home / "store.db") as copy,
    ):
        source.backup(copy)  # a consistent copy of the live store (its WAL included)
    permissive = start(permissive_home, env={"AIRFLOW_TRAINING_AUTHORIZATION": "permissive"}, timeout=300)
    admin.post("/api/v1/namespaces/default/serviceaccounts", json={"metadata": {"name": "bench"}})
    admin.post(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        json={
            "metadata": {"name": "bench-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "bench", "namespace": "default"}],
        },
    ).raise_for_status()
    clients = {}
    for name, daemon in (("rbac", plane), ("permissive", permissive)):
        boot = httpx.Client(
            base_url=daemon.api_url, verify=str(daemon.ca), headers={"Authorization": f"Bearer {daemon.token}"}
        )
        boot.post("/api/v1/namespaces/default/serviceaccounts", json={"metadata": {"name": "bench"}})
        token = boot.post("/api/v1/namespaces/default/serviceaccounts/bench/token", json={"spec": {}}).json()
        boot.close()
        clients[name] = httpx.Client(
            base_url=daemon.api_url,
            verify=str(daemon.ca),
            headers={"Authorization": f"Bearer {token['status']['token']}"},
            timeout=30,
        )
    pod = f"/api/v1/namespaces/default/pods/{job}-worker-3"
    selector = {"labelSelector": f"training.kubeflow.org/job-name={job}"}
    requests = {
        "get pod": lambda c: c.get(pod).raise_for_status(),
        "list, selector = 10 pods": lambda c: c.get(
            "/api/v1/namespaces/default/pods", params=selector
        ).raise_for_status(),
        "discovery (GET /api)": lambda c: c.get("/api").raise_for_status(),
    }
    print(
        f"\nAuthorization: a service account bound to view, {repeat * 2} requests each, RBAC and permissive alternating"
    )
    for label, request in requests.items():
        for c in clients.values():
            timed(lambda c=c, r=request: r(c), 20)  # warm: the token and the rules are cached after the first
        samples: dict[str, list[float]] = {"rbac": [], "permissive": []}
        for _ in range(repeat * 2):
            for name, c in clients.items():
                samples[name] += timed(lambda c=c, r=request: r(c), 1)
        added = percentiles(samples["rbac"])[0] - percentiles(samples["permissive"])[0]
        print(row(f"{label:<28} RBAC vs permissive", samples["rbac"], samples["permissive"]))
        print(f"    added p50: {added * 1000:+.3f} ms (goal < 0.2 ms): {'met' if added < 0.0002 else 'NOT met'}")
    for c in clients.values():
        c.close()
    in_process()


def in_process() -> None:
    """The authorization check alone (no HTTP): authentication of a service-account token, the
    request's attributes and the RBAC decision, against the default policy plus one binding."""
    with tempfile.TemporaryDirectory(prefix="apt-bench-authz-") as directory:
        home = Home.at(directory)
        home.ensure()
        store = Store(home.store)
        try:
            _time_check(home, store)
        finally:
            store.close()


def _time_check(home: Home, store: Store) -> None:
    from airflow_provider_training.embedded.apiserver import authz
    from airflow_provider_training.embedded.apiserver.context import ServerContext
    from airflow_provider_training.embedded.rbac import bootstrap
    from airflow_provider_training.embedded.rbac.aggregation import aggregated_rules
    from airflow_provider_training.embedded.serviceaccount import ISSUER, ensure_default, mint_request

    bootstrap.install(store)
    store.create("core/namespaces", {"metadata": {"name": "default"}})
    account = ensure_default(store, "default")
    assert account is not None
    store.create(
        "rbac.authorization.k8s.io/rolebindings",
        {
            "metadata": {"name": "v", "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}],
        },
    )
    for role in store.list("rbac.authorization.k8s.io/clusterroles").items:  # what the aggregation controller does
        if role.get("aggregationRule"):
            role["rules"] = aggregated_rules(role, store.list("rbac.authorization.k8s.io/clusterroles").items)
            store.update("rbac.authorization.k8s.io/clusterroles", role)
    ctx = ServerContext(store=store, home=home, token="admin")
    token = mint_request(home.root, "default", "default", account["metadata"]["uid"], [ISSUER], int(time.time()) + 3600)
    headers = {"authorization": f"Bearer {token}"}
    query = {"labelSelector": "a=b"}
    check = lambda: authz.check(ctx, "GET", "api/v1/namespaces/default/pods", headers, query)  # noqa: E731
    check()
    samples = timed(check, 20_000)
    print(row("in-process authz.check (authn + attributes + RBAC)", samples))


if __name__ == "__main__":
    main()
