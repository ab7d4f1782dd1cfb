"""What a client costs the API server, read from the server's side: ``kubectl get --raw /metrics``
(kube-apiserver's ``apiserver_longrunning_requests`` and ``apiserver_request_total``, which the
embedded API server exports under the same names)."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.paths import ROOT

KUBECTL = ROOT / ".venv" / "bin" / "kubectl"
_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+-]+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


def scrape(kubeconfig: Path | str) -> list[Sample]:
    done = subprocess.run(
        [str(KUBECTL), "get", "--raw", "/metrics"],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise RuntimeError(f"kubectl get --raw /metrics failed ({done.returncode}): {done.stderr.strip()}")
    out = done.stdout
    samples = []
    for line in out.splitlines():
        if (m := _SAMPLE.match(line)) is not None:
            samples.append(Sample(m["name"], dict(_LABEL.findall(m["labels"])), float(m["value"])))
    return samples


def open_watches(kubeconfig: Path | str, resource: str | None = None) -> int:
    """Watches open now (of ``resource``, e.g. ``pytorchjobs``)."""
    return int(
        sum(
            s.value
            for s in scrape(kubeconfig)
            if s.name == "apiserver_longrunning_requests"
            and s.labels.get("verb") == "WATCH"
            and (resource is None or s.labels.get("resource") == resource)
        )
    )


def requests(kubeconfig: Path | str) -> int:
    """Requests about resources answered so far (a watch counts when it ends; ``/metrics`` never)."""
    return int(sum(s.value for s in scrape(kubeconfig) if s.name == "apiserver_request_total"))
