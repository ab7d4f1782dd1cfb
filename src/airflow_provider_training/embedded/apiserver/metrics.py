"""``GET /metrics``: the API server's request counters in Prometheus' text format, named as
kube-apiserver names them, so what a client costs the server can be read from outside
(``kubectl get --raw /metrics``) — the same way on a cluster and here.

- ``apiserver_request_total{verb, group, version, resource, subresource, scope, code}``: requests
  answered (a watch is counted when it ends);
- ``apiserver_longrunning_requests{verb, group, version, resource, subresource, scope}``: watches
  open now (kube-apiserver counts log follows and execs there too; this one counts watches).

Verbs as kube-apiserver reports them: ``GET``, ``LIST``, ``WATCH``, ``POST``, ``PUT``, ``PATCH``,
``DELETE``, ``DELETECOLLECTION``, ``APPLY``; scope ``resource`` (one named object), ``namespace``
or ``cluster``. Requests that are not about a resource (discovery, OpenAPI, health, this one) are
not counted.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from airflow_provider_training.embedded.apiserver.http import Target

# (verb, group, version, resource, subresource, scope)
Labels = tuple[str, str, str, str, str, str]
LABEL_NAMES = ("verb", "group", "version", "resource", "subresource", "scope")
COMPONENT = 'component="apiserver"'


def labels(verb: str, target: Target) -> Labels:
    scope = "resource" if target.name else ("namespace" if target.namespace else "cluster")
    rt = target.rt
    return (verb.upper(), rt.group, rt.version, rt.plural, target.subresource or "", scope)


@dataclass
class ApiMetrics:
    """Counters shared by the request handlers (the event loop) and nothing else; a lock anyway,
    since a handler may run in a thread."""

    requests: Counter[tuple[Labels, int]] = field(default_factory=Counter)
    longrunning: Counter[Labels] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answered(self, key: Labels, code: int) -> None:
        with self._lock:
            self.requests[(key, code)] += 1

    def opened(self, key: Labels) -> None:
        with self._lock:
            self.longrunning[key] += 1

    def closed(self, key: Labels, code: int = 200) -> None:
        with self._lock:
            self.longrunning[key] -= 1
            self.requests[(key, code)] += 1

    def text(self) -> str:
        with self._lock:
            requests, longrunning = dict(self.requests), dict(self.longrunning)
        lines = [
            "# HELP apiserver_longrunning_requests Gauge of all active long-running apiserver requests "
            "broken out by verb, group, version, resource, scope and component.",
            "# TYPE apiserver_longrunning_requests gauge",
        ]
        lines += [f"apiserver_longrunning_requests{{{_labels(key)}}} {n}" for key, n in sorted(longrunning.items())]
        lines += [
            "# HELP apiserver_request_total Counter of apiserver requests broken out for each verb, dry run "
            "value, group, version, resource, scope, component, and HTTP response code.",
            "# TYPE apiserver_request_total counter",
        ]
        lines += [
            f'apiserver_request_total{{code="{code}",{_labels(key)}}} {n}'
            for (key, code), n in sorted(requests.items())
        ]
        return "\n".join(lines) + "\n"


def _labels(key: Labels) -> str:
    pairs = [f'{name}="{value}"' for name, value in zip(LABEL_NAMES, key, strict=True)]
    return ",".join([COMPONENT, *pairs])
