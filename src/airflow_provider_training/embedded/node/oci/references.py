"""Image references as a container runtime reads them, and the node's image table.

``parse`` follows Docker's normalisation: a first segment without ``.`` or ``:`` (and not
``localhost``) is a Docker Hub repository (``python:3.11`` is ``docker.io/library/python:3.11``),
no tag means ``latest``. Registries on a loopback address are spoken to over plain HTTP, as Docker
treats ``127.0.0.0/8`` as an insecure registry.

The image table (``<home>/image-table.yaml``, or ``$AIRFLOW_TRAINING_IMAGE_TABLE``) maps the names
DAGs and the seed's YAMLs use to where this node pulls them from — the images ``tools/images.py``
built and pushed to a local registry — in one documented place::

    images:
      - match: "ccr.ccs.tencentyun.com/ml-models/*"      # fnmatch pattern on the normalised name
        pull: "127.0.0.1:5050/{path}:{tag}"              # {path}: repository, {tag}: tag (or latest)
      - match: "ghcr.io/kitops-ml/kitops:*"
        pull: "127.0.0.1:5050/ml-models/digits-kit@sha256:…"   # a digest pins exactly what was built
        plainHTTP: true                                  # (default: true for loopback registries)

The first matching entry applies; an image no entry matches is pulled as it is named.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from airflow_provider_training.specs.kitfile.reference import Reference, ReferenceError
from airflow_provider_training.specs.kitfile.reference import parse as parse_reference

TABLE_ENV = "AIRFLOW_TRAINING_IMAGE_TABLE"
TABLE_FILE = "image-table.yaml"
DOCKER_HUB = "docker.io"


class ImageTableError(ValueError):
    pass


def parse(image: str) -> Reference:
    """``image`` normalised (registry, repository, tag or digest); ReferenceError names what is wrong."""
    text = (image or "").strip()
    if not text:
        raise ReferenceError("the container has no image")
    first = text.split("/", 1)[0]
    explicit_registry = "/" in text and ("." in first or ":" in first or first == "localhost")
    if not explicit_registry:
        text = f"{DOCKER_HUB}/{text if '/' in text else 'library/' + text}"
    ref = parse_reference(text, default_tag="")
    if not ref.tag and not ref.digest:
        ref = Reference(ref.registry, ref.repository, "latest", "")
    return ref


def display(ref: Reference) -> str:
    """The reference as the kubelet prints it (``docker.io/library/python:3.11``)."""
    out = f"{ref.registry}/{ref.repository}"
    if ref.tag:
        out += f":{ref.tag}"
    if ref.digest:
        out += f"@{ref.digest}"
    return out


def loopback(registry: str) -> bool:
    host = registry.rsplit(":", 1)[0].strip("[]") if registry.count(":") <= 1 else registry.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Entry:
    match: str
    pull: str
    plain_http: bool | None = None
    tls_verify: bool = True


@dataclass(frozen=True)
class Source:
    """Where an image is pulled from: the reference after the table, and how to speak to its registry."""

    image: str  # as the pod names it
    ref: Reference  # what is pulled
    plain_http: bool
    tls_verify: bool

    @property
    def pulled(self) -> str:
        return display(self.ref)


def table_path(home_root: Path) -> Path:
    return Path(os.environ.get(TABLE_ENV) or home_root / TABLE_FILE)


def load_table(path: Path) -> list[Entry]:
    if not path.exists():
        return []
    try:
        data: Any = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ImageTableError(f"{path}: cannot read the image table: {exc}") from None
    entries = data.get("images") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ImageTableError(f"{path}: expected a mapping with a list under 'images'")
    out = []
    for i, entry in enumerate(entries):
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("match"), str)
            or not isinstance(entry.get("pull"), str)
        ):
            raise ImageTableError(f"{path}: images[{i}] needs a string 'match' (an fnmatch pattern) and 'pull'")
        plain = entry.get("plainHTTP")
        out.append(
            Entry(
                entry["match"],
                entry["pull"],
                None if plain is None else bool(plain),
                entry.get("tlsVerify", True) is not False,
            )
        )
    return out


def resolve(image: str, table: list[Entry]) -> Source:
    """Where ``image`` comes from on this node (ReferenceError for a name no registry could serve)."""
    ref = parse(image)
    name = display(ref)
    for entry in table:
        if fnmatch.fnmatchcase(name, entry.match) or fnmatch.fnmatchcase(image.strip(), entry.match):
            target = entry.pull.format(path=ref.repository, tag=ref.tag or "latest", name=ref.name)
            pulled = parse(target)
            plain = entry.plain_http if entry.plain_http is not None else loopback(pulled.registry)
            return Source(image, pulled, plain, entry.tls_verify)
    return Source(image, ref, loopback(ref.registry), True)
