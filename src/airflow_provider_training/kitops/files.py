"""Reading one file of a ModelKit in a registry (e.g. the ``metrics.json`` a Kitfile lists under
``docs``) without touching the user's local store: pulled into a temporary store and unpacked there."""

from __future__ import annotations

import tempfile
from pathlib import Path

from airflow_provider_training.kitops import transfer
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.reference import DEFAULT_TAG, parse
from airflow_provider_training.kitops.registry import RegistryClient
from airflow_provider_training.kitops.unpack import FILTERS, unpack


def read_file(client: RegistryClient, reference: str, path: str, filters: tuple[str, ...] = ("docs",)) -> bytes:
    """The bytes of ``path`` inside ModelKit ``reference`` (``kit://`` accepted); ``filters`` names the
    Kitfile sections to unpack for it (default ``docs``; any of :data:`FILTERS`).
    Raises ``FileNotFoundError`` naming the reference when the ModelKit has no such file."""
    ref = parse(reference.removeprefix("kit://"), default_tag=DEFAULT_TAG, check_tcr=False)
    unknown = set(filters) - set(FILTERS)
    if unknown:
        raise ValueError(f"unknown section(s) {sorted(unknown)}; use {', '.join(FILTERS)}")
    with tempfile.TemporaryDirectory(prefix="kit-read-") as tmp:
        store = LocalStore(Path(tmp) / "store")
        transfer.pull(store, ref, client)
        root = Path(tmp) / "files"
        unpack(store, ref, root, filters=filters)
        target = (root / path).resolve()
        if root.resolve() not in target.parents or not target.is_file():
            raise FileNotFoundError(f"ModelKit {ref} has no file {path!r} in its {'/'.join(filters)} section(s)")
        return target.read_bytes()
