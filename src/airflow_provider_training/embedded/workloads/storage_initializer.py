"""The storage initializer of a predictor Pod: KitOps' KServe storage container, in Python.

``python -m airflow_provider_training.embedded.workloads.storage_initializer kit://<reference> /mnt/models``

Same contract as ``ghcr.io/kitops-ml/kitops-kserve``'s ``entrypoint.sh <src-uri> <dest-path>``: strip
``kit://``, log in with ``KIT_USER`` / ``KIT_PASSWORD`` when set, then ``kit unpack <ref> -d <dest>
$KIT_UNPACK_FLAGS`` and print the Kitfile. ``KIT_UNPACK_FLAGS`` understands kit's network flags
(``--plain-http``, ``--tls-verify=false``, ``--cert <CA PEM file>``) and ``--filter``, and
``KIT_CA_CERT`` (a CA bundle as PEM text) is trusted for TLS; so one Secret
serves both this container and a cluster's ClusterStorageContainer. The ModelKit is pulled into a
temporary store that is removed afterwards; nothing secret is printed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from pathlib import Path

from airflow_provider_training.kitops import transfer
from airflow_provider_training.kitops import unpack as unpackmod
from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.credentials import Credential
from airflow_provider_training.kitops.localstore import LocalStore, StoreError
from airflow_provider_training.kitops.reference import DEFAULT_TAG, ReferenceError, parse
from airflow_provider_training.kitops.registry import RegistryError

SCHEME = "kit://"


def _flags(text: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="KIT_UNPACK_FLAGS", add_help=False, exit_on_error=False)
    parser.add_argument("--plain-http", action="store_true")
    parser.add_argument("--tls-verify", default="true")
    parser.add_argument("--cert", default=None)
    parser.add_argument("--filter", action="append", default=[])
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--ignore-existing", action="store_true")
    parsed, unknown = parser.parse_known_args(shlex.split(text))
    if unknown:
        print(f"storage-initializer: ignoring KIT_UNPACK_FLAGS it does not know: {' '.join(unknown)}", flush=True)
    return parsed


def initialize(uri: str, destination: Path) -> int:
    if not uri.startswith(SCHEME):
        print(f"storage-initializer: {uri!r} is not a kit:// URI", file=sys.stderr, flush=True)
        return 2
    try:
        ref = parse(uri[len(SCHEME) :], default_tag=DEFAULT_TAG, check_tcr=False)
    except ReferenceError as exc:
        print(f"storage-initializer: {uri}: {exc}", file=sys.stderr, flush=True)
        return 2
    flags = _flags(os.environ.get("KIT_UNPACK_FLAGS", ""))
    user, password = os.environ.get("KIT_USER", ""), os.environ.get("KIT_PASSWORD", "")
    credential = Credential(user, password) if user else (Credential(identity_token=password) if password else None)
    print(f"storage-initializer: pulling ModelKit {ref} into {destination}", flush=True)
    with tempfile.TemporaryDirectory(prefix="kit-store-") as home:
        store = LocalStore(Path(home))
        try:
            with make_client(
                ref.registry,
                plain_http=flags.plain_http,
                tls_verify=str(flags.tls_verify).lower() not in ("false", "0", "no"),
                ca_cert=flags.cert or os.environ.get("KIT_CA_CERT") or None,
                credential=credential,
                home=Path(home),
            ) as client:
                pulled = transfer.pull(store, ref, client)
            result = unpackmod.unpack(
                store,
                ref,
                destination,
                filters=flags.filter,
                overwrite=flags.overwrite or not flags.ignore_existing,
                ignore_existing=flags.ignore_existing,
            )
        except (RegistryError, StoreError, unpackmod.UnpackError, ValueError, OSError) as exc:
            print(f"storage-initializer: cannot pull and unpack {ref}: {exc}", file=sys.stderr, flush=True)
            return 1
    print(
        f"storage-initializer: unpacked {ref}@{pulled.digest} ({result.files} files, {result.layers} layers)",
        flush=True,
    )
    kitfile = destination / "Kitfile"
    if kitfile.is_file():
        print(kitfile.read_text(), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Pull a kit:// ModelKit and unpack it for a predictor.")
    parser.add_argument("uri", help="kit://<registry>/<namespace>/<repository>:<tag>")
    parser.add_argument("destination", type=Path, help="where the predictor reads the model (/mnt/models)")
    args = parser.parse_args(argv)
    return initialize(args.uri, args.destination)


if __name__ == "__main__":
    sys.exit(main())
