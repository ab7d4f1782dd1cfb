"""``airflow-training kit pack|push|pull|unpack|inspect|login|list|diff`` — kit's commands, natively.

Same home and storage as kit (``KITOPS_HOME``); passwords only from stdin (``--password-stdin``).
Progress bars go to stderr and only when it is a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from airflow_provider_training.kitops import api, indextransfer, keys, listing, packpush, signing, transfer
from airflow_provider_training.kitops import diff as diffmod
from airflow_provider_training.kitops import index as ix
from airflow_provider_training.kitops import pack as packmod
from airflow_provider_training.kitops.indexstore import IndexStore
from airflow_provider_training.kitops.jsontext import go_indent
from airflow_provider_training.kitops.localstore import LocalStore, NotInStoreError, StoreError
from airflow_provider_training.kitops.mediatypes import LAYER_FORMATS
from airflow_provider_training.kitops.reference import DEFAULT_TAG, ReferenceError, parse
from airflow_provider_training.kitops.registry import RegistryError
from airflow_provider_training.kitops.tarlayer import COMPRESSIONS
from airflow_provider_training.kitops.unpack import FILTERS, UnpackError, UnsafePathError, unpack
from airflow_provider_training.specs.gojson import go_marshal
from airflow_provider_training.specs.kitfile import KitfileError


@contextlib.contextmanager
def progress_bar(description: str, total: int | None) -> Iterator[Callable[[int], None] | None]:
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def _bool(text: str) -> bool:
    return text.lower() in ("1", "true", "yes", "on")


def _net(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plain-http", action="store_true", help="use http:// (local test registries)")
    p.add_argument("--tls-verify", type=_bool, default=True, metavar="BOOL", help="verify TLS (default true)")
    p.add_argument("--tls-cert", default=None, help="extra CA bundle (PEM) for the registry")


def register(subparsers: Any) -> None:
    kit = subparsers.add_parser("kit", help="pack, push, pull and unpack KitOps ModelKits")
    sub = kit.add_subparsers(dest="kit_command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("pack", help="pack a directory into a ModelKit in the local store")
    p.add_argument("directory")
    p.add_argument("-t", "--tag", help="reference, e.g. registry/namespace/repo:tag[,tag2]")
    p.add_argument(
        "-f", "--file", help="Kitfile path, '-' for stdin (default: the directory's Kitfile, else generated)"
    )
    p.add_argument("--compression", choices=COMPRESSIONS, default="none")
    p.add_argument("--use-model-pack", action="store_true", help="write the CNCF ModelPack format (as kit)")
    p.add_argument(
        "--layer-format", choices=LAYER_FORMATS, default="tar", help="raw: each layer is one file stored verbatim"
    )
    p.add_argument(
        "--push", action="store_true", help="stream the layers straight to the registry (no copy in the local store)"
    )
    _net(p)
    p.set_defaults(func=cmd_pack)

    p = sub.add_parser("push", help="push a ModelKit from the local store to its registry")
    p.add_argument("reference")
    p.add_argument("destination", nargs="?")
    _net(p)
    p.set_defaults(func=cmd_push)

    p = sub.add_parser("pull", help="pull a ModelKit into the local store")
    p.add_argument("reference")
    p.add_argument(
        "-l",
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="select a ModelKit from an index by label (repeatable)",
    )
    _net(p)
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser("unpack", help="unpack a ModelKit (pulled first if not local)")
    p.add_argument("reference")
    p.add_argument("-d", "--dir", default=".")
    p.add_argument("--filter", action="append", default=[], choices=FILTERS)
    p.add_argument("-o", "--overwrite", action="store_true")
    p.add_argument("-i", "--ignore-existing", action="store_true")
    p.add_argument(
        "-l",
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="select a ModelKit from an index by label (repeatable)",
    )
    _net(p)
    p.set_defaults(func=cmd_unpack)

    p = sub.add_parser("inspect", help="print the ModelKit's manifest and Kitfile as JSON")
    p.add_argument("reference")
    p.add_argument("-r", "--remote", action="store_true")
    p.add_argument(
        "--provenance", action="store_true", help="print the provenance statement attached in the registry instead"
    )
    p.add_argument("--key", help="with --provenance: verify it with this public key (cosign.pub)")
    _net(p)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("login", help="verify and store registry credentials (password on stdin)")
    p.add_argument("registry")
    p.add_argument("-u", "--username", default="")
    p.add_argument("--password-stdin", action="store_true", required=True)
    _net(p)
    p.set_defaults(func=cmd_login)

    p = sub.add_parser("list", help="list ModelKits in the local store (JSON as kit 1.17: sizes in bytes)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("diff", help="compare two ModelKits: layers and the files that changed in them")
    p.add_argument("first", help="reference; prefix local:// or remote:// (default: local, else remote)")
    p.add_argument("second")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-files", action="store_true", help="compare layers only (do not read changed layers)")
    _net(p)
    p.set_defaults(func=cmd_diff)

    p = sub.add_parser("keygen", help="write an ECDSA P-256 key pair as cosign does (cosign.key, cosign.pub)")
    p.add_argument("--output-key-prefix", default="cosign")
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin (else $COSIGN_PASSWORD)")
    p.set_defaults(func=cmd_keygen)

    p = sub.add_parser("sign", help="sign a pushed ModelKit's digest in cosign's format")
    p.add_argument("reference", help="registry/namespace/repo:tag or @sha256:…")
    p.add_argument("--key", required=True, help="private key file (cosign.key or PKCS #8 PEM)")
    p.add_argument("--password-stdin", action="store_true", help="key password on stdin (else $COSIGN_PASSWORD)")
    p.add_argument("-a", "--annotation", action="append", default=[], help="KEY=VALUE into the signed payload")
    _net(p)
    p.set_defaults(func=cmd_sign)

    p = sub.add_parser("verify", help="verify a ModelKit's cosign signature (and its layers and provenance)")
    p.add_argument("reference")
    p.add_argument("--key", required=True, help="public key file (cosign.pub) or X.509 certificate")
    p.add_argument("--no-layers", action="store_true", help="do not read the layers to check their digests")
    p.add_argument("--require-provenance", action="store_true")
    _net(p)
    p.set_defaults(func=cmd_verify)

    _register_index(sub)

    for name in (
        "pack",
        "push",
        "pull",
        "unpack",
        "inspect",
        "login",
        "list",
        "diff",
        "keygen",
        "sign",
        "verify",
        "index",
    ):
        sub.choices[name].set_defaults(_wrapped=True)


def _client(args: argparse.Namespace, registry: str) -> Any:
    return api.make_client(registry, plain_http=args.plain_http, tls_verify=args.tls_verify, ca_cert=args.tls_cert)


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except (
            KitfileError,
            ReferenceError,
            RegistryError,
            StoreError,
            UnpackError,
            UnsafePathError,
            keys.KeyProblem,
            signing.SignatureError,
            FileNotFoundError,
            ValueError,
        ) as exc:
            print(f"Error: {exc}", file=sys.stderr)
            return 1

    run.__name__ = fn.__name__
    return run


@_guard
def cmd_pack(args: argparse.Namespace) -> int:
    ref = parse(args.tag, default_tag=DEFAULT_TAG) if args.tag else None
    kitfile = args.file
    if kitfile == "-":  # as kit: the Kitfile's YAML on stdin (a trailing newline marks it as text)
        kitfile = sys.stdin.read().rstrip("\n") + "\n"
    options = {
        "kitfile": kitfile,
        "compression": args.compression,
        "modelpack": args.use_model_pack,
        "layer_format": args.layer_format,
    }
    if args.push:
        if ref is None:
            print("Error: pack --push needs a reference (-t registry/namespace/repo:tag)", file=sys.stderr)
            return 1
        with _client(args, ref.registry) as client, progress_bar(f"packing and pushing {ref}", None) as progress:
            res = packpush.pack_and_push(args.directory, ref, client, progress=progress, **options)
        print(f"Pushed {res.digest}")
        return 0
    with progress_bar("packing", None) as progress:
        res = packmod.pack(args.directory, reference=ref, progress=progress, **options)
    print(f"Model saved: {res.digest}")
    return 0


@_guard
def cmd_push(args: argparse.Namespace) -> int:
    src = parse(args.reference, default_tag=DEFAULT_TAG)
    dst = parse(args.destination, default_tag=DEFAULT_TAG) if args.destination else src
    store = LocalStore()
    manifest = store.read_manifest(store.resolve(src))
    total = sum(layer["size"] for layer in manifest.get("layers") or [])
    with _client(args, dst.registry) as client, progress_bar(f"pushing {dst}", total) as progress:
        res = transfer.push(store, src, client, dst, progress)
    print(f"Pushed {res.digest}")
    return 0


@_guard
def cmd_pull(args: argparse.Namespace) -> int:
    ref = parse(args.reference, default_tag=DEFAULT_TAG)
    selector = ix.parse_selector(args.label)
    with _client(args, ref.registry) as client, progress_bar(f"pulling {ref}", None) as progress:
        if selector:
            selected = indextransfer.select_remote(client, ref, selector, "pull")
            res = _pull_selected(LocalStore(), selected, ref, client, progress)
            print(f"Pulled {res.digest} from index {ref} ({', '.join(selected.entry.label_pairs())})")
            return 0
        res = transfer.pull(LocalStore(), ref, client, progress)
    print(f"Pulled {res.digest}")
    return 0


def _select_for_unpack(args: argparse.Namespace, ref: Any, store: LocalStore) -> Any:
    """``unpack -l``: the ModelKit an index (local first, as kit) selects, pulled if needed."""
    selector = ix.parse_selector(args.label)
    selected = indextransfer.select_local(IndexStore(store), ref, selector, "unpack")
    if selected is None and ref.registry == "localhost":
        raise ix.ModelKitIndexError(
            f"could not find ModelKit index {ref} in the local store ('kit index pull' it, or give its registry)"
        )
    if selected is None:
        with _client(args, ref.registry) as client:
            selected = indextransfer.select_remote(client, ref, selector, "unpack")
    try:
        store.resolve(selected.reference)
    except StoreError:
        if ref.registry == "localhost":
            raise
        with _client(args, ref.registry) as client:
            _pull_selected(store, selected, ref, client, None)
    return selected.reference


def _pull_selected(store: LocalStore, selected: Any, index_ref: Any, client: Any, progress: Any) -> Any:
    try:
        return transfer.pull(store, selected.reference, client, progress)
    except transfer.IsAnIndexError:
        raise ix.ModelKitIndexError(
            f"index {index_ref}: entry {selected.entry.digest} is itself a ModelKit index, though listed as a "
            "ModelKit; a ModelKit index lists ModelKits only (nested indexes are not followed)"
        ) from None


@_guard
def cmd_unpack(args: argparse.Namespace) -> int:
    ref = parse(args.reference, default_tag=DEFAULT_TAG)
    store = LocalStore()
    if args.label:
        ref = _select_for_unpack(args, ref, store)
    else:
        try:
            store.resolve(ref)
        except StoreError:
            if ref.registry == "localhost" and IndexStore(store).list():
                _refuse_local_index(store, ref)
            with _client(args, ref.registry) as client:
                try:
                    transfer.pull(store, ref, client)
                except transfer.IsAnIndexError:
                    indextransfer.select_remote(client, ref, {}, "unpack")  # kit's "select ... with --label"
                    raise
    res = unpack(store, ref, args.dir, args.filter, args.overwrite, args.ignore_existing)
    print(f"Unpacked {res.files} files from {res.layers} layers to {res.directory}")
    return 0


@_guard
def cmd_inspect(args: argparse.Namespace) -> int:
    ref = parse(args.reference, default_tag=DEFAULT_TAG)
    if args.provenance:
        key = _public_key(args.key) if args.key else None
        with _client(args, ref.registry) as client:
            _, digest, _ = transfer.fetch_manifest(client, ref)
            statement = signing.read_provenance(client, ref, digest, key)
        if statement is None:
            print(f"Error: {ref}@{digest} has no provenance attestation", file=sys.stderr)
            return 1
        print(json.dumps(statement, indent=2))
        return 0
    if args.remote:
        with _client(args, ref.registry) as client:
            data = transfer.inspect_remote(client, ref)
    else:
        store = LocalStore()
        try:
            data = transfer.inspect_local(store, ref)
        except NotInStoreError:
            _refuse_local_index(store, ref, "inspect")  # an index under that name: say so
            raise
    print(json.dumps(data, indent=2))
    return 0


@_guard
def cmd_login(args: argparse.Namespace) -> int:
    password = sys.stdin.read().rstrip("\r\n")
    api.login(
        args.registry,
        args.username,
        password,
        plain_http=args.plain_http,
        tls_verify=args.tls_verify,
        ca_cert=args.tls_cert,
    )
    print("Log in successful")
    return 0


@_guard
def cmd_list(args: argparse.Namespace) -> int:
    listed = listing.rows(LocalStore())
    print(listing.to_json(listed) if args.format == "json" else listing.to_table(listed))
    return 0


def _side(args: argparse.Namespace, text: str, store: LocalStore, clients: contextlib.ExitStack) -> Any:
    where = "remote" if text.startswith("remote://") else "local" if text.startswith("local://") else ""
    ref = parse(text.removeprefix("remote://").removeprefix("local://"), default_tag=DEFAULT_TAG)
    if where != "remote":
        try:
            return transfer.local_side(store, ref)
        except StoreError:
            if where == "local":
                raise
    client = clients.enter_context(_client(args, ref.registry))
    return transfer.remote_side(client, ref)


@_guard
def cmd_diff(args: argparse.Namespace) -> int:
    store = LocalStore()
    with contextlib.ExitStack() as clients:
        first = _side(args, args.first, store, clients)
        second = _side(args, args.second, store, clients)
        result = diffmod.diff(first, second, files=not args.no_files)
    if args.format == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        for line in diffmod.render(result):
            print(line)
    return 0


def _password(args: argparse.Namespace) -> str | None:
    if getattr(args, "password_stdin", False):
        return sys.stdin.read().rstrip("\r\n")
    return os.environ.get("COSIGN_PASSWORD")


def _public_key(path: str) -> Any:
    data, source = keys.key_bytes(path, "public key")
    return keys.load_public_key(data, source)


@_guard
def cmd_keygen(args: argparse.Namespace) -> int:
    password = _password(args)
    if password is None:
        print("Error: give the key password on stdin (--password-stdin) or in $COSIGN_PASSWORD", file=sys.stderr)
        return 1
    private, public = Path(f"{args.output_key_prefix}.key"), Path(f"{args.output_key_prefix}.pub")
    for path in (private, public):
        if path.exists():
            print(f"Error: {path} exists; remove it or choose another --output-key-prefix", file=sys.stderr)
            return 1
    pair = keys.generate_key_pair(password)
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pair.private_pem)
    public.write_bytes(pair.public_pem)
    print(f"Private key written to {private}\nPublic key written to {public}")
    return 0


@_guard
def cmd_sign(args: argparse.Namespace) -> int:
    ref = parse(args.reference, default_tag=DEFAULT_TAG)
    key = keys.load_private_key(keys.read_key_file(args.key, "private key"), _password(args), f"private key {args.key}")
    optional = dict(a.split("=", 1) for a in args.annotation if "=" in a)
    with _client(args, ref.registry) as client:
        _, digest, _ = transfer.fetch_manifest(client, ref)
        res = signing.sign(client, ref, digest, key, optional or None)
    where = "tag and OCI referrer" if res.referrers else "tag (registry has no referrers API)"
    print(f"Signed {res.reference}@{res.digest} -> {res.tag} ({where})")
    return 0


@_guard
def cmd_verify(args: argparse.Namespace) -> int:
    ref = parse(args.reference, default_tag=DEFAULT_TAG)
    key = _public_key(args.key)
    with _client(args, ref.registry) as client:
        res = signing.verify(
            client, ref, key, check_layers=not args.no_layers, require_provenance=args.require_provenance
        )
    print(f"Verified {res.reference}@{res.digest}: {res.signatures} valid signature(s) by the key")
    if res.layers_checked:
        print(f"  {res.layers_checked} blobs match their digests")
    if res.provenance is not None:
        run = res.provenance["predicate"]["runDetails"]["metadata"].get("invocationId", "")
        print(f"  provenance (SLSA v1) signed by the same key: {run}")
    return 0


# -- kit index ---------------------------------------------------------------------------------


def _refuse_local_index(store: LocalStore, ref: Any, what: str = "unpack") -> None:
    """A reference that names only a local index: say so, as kit does, instead of 'not found'."""
    with contextlib.suppress(NotInStoreError):
        indextransfer.select_local(IndexStore(store), ref, {}, what)


def _register_index(sub: Any) -> None:
    index = sub.add_parser("index", help="ModelKit indexes (kit 1.17): variants of a model under one reference")
    isub = index.add_subparsers(dest="index_command", metavar="COMMAND")
    isub.required = True

    p = isub.add_parser("create", help="create an empty index in the local store")
    p.add_argument("index")
    p.set_defaults(func=cmd_index_create)

    p = isub.add_parser("add", help="add a ModelKit (of the same repository) to an index, or relabel it")
    p.add_argument("index")
    p.add_argument("modelkit")
    p.add_argument("-l", "--label", action="append", default=[], help="key=value, key:=<json> or key- (repeatable)")
    p.add_argument("--annotate", action="append", default=[], help="key=value or key- (repeatable)")
    p.add_argument("-r", "--remote", action="store_true", help="read the ModelKit from its registry")
    _net(p)
    p.set_defaults(func=cmd_index_add)

    p = isub.add_parser("remove", help="remove a ModelKit from an index")
    p.add_argument("index")
    p.add_argument("modelkit")
    p.set_defaults(func=cmd_index_remove)

    p = isub.add_parser("delete", help="delete an index from the local store (its ModelKits stay)")
    p.add_argument("index")
    p.set_defaults(func=cmd_index_delete)

    p = isub.add_parser("list", help="list the indexes in the local store")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=cmd_index_list)

    p = isub.add_parser("inspect", help="print an index as JSON")
    p.add_argument("index")
    p.add_argument("-r", "--remote", action="store_true")
    _net(p)
    p.set_defaults(func=cmd_index_inspect)

    p = isub.add_parser("push", help="push an index (its ModelKits must be in the registry already)")
    p.add_argument("index")
    p.add_argument("destination", nargs="?")
    _net(p)
    p.set_defaults(func=cmd_index_push)

    p = isub.add_parser("pull", help="pull an index (not its ModelKits) into the local store")
    p.add_argument("index")
    _net(p)
    p.set_defaults(func=cmd_index_pull)


def _index_ref(text: str) -> Any:
    ref = parse(text, default_tag=DEFAULT_TAG)
    if ref.extra_tags:
        raise ReferenceError(f"invalid index reference {text!r}: extra tags are not supported")
    if ref.digest:
        raise ReferenceError(f"index reference must be a tag, not a digest: {text}")
    return ref


@_guard
def cmd_index_create(args: argparse.Namespace) -> int:
    ref = _index_ref(args.index)
    istore = IndexStore(LocalStore())
    try:
        istore.resolve(ref)
    except NotInStoreError:
        desc = istore.put(ref, ix.ModelKitIndex().to_bytes())
        print(f"Created index {ref} (digest {desc.digest})")
        return 0
    print(f"Error: index {ref} already exists; add ModelKits to it or delete it first", file=sys.stderr)
    return 1


@_guard
def cmd_index_add(args: argparse.Namespace) -> int:
    ref = _index_ref(args.index)
    model = parse(args.modelkit)
    if not (model.tag or model.digest):
        raise ReferenceError(f"missing tag or digest from ModelKit reference {args.modelkit!r}")
    if model.repo_key != ref.repo_key:
        raise ReferenceError(
            f"ModelKit {model} is not in the same repository as index {ref}; an index may only reference "
            "ModelKits in its own repository"
        )
    labels, drop_labels = ix.parse_label_edits(args.label)
    annotations, drop_annotations = ix.parse_annotation_edits(args.annotate)
    store = LocalStore()
    istore = IndexStore(store)
    if args.remote:
        with _client(args, model.registry) as client:
            data, digest, manifest = transfer.fetch_manifest(client, model)
        size = len(data)
    else:
        try:
            desc = store.resolve(model)
        except NotInStoreError:
            raise NotInStoreError(
                f"could not find ModelKit {model} in local storage; use --remote to resolve it in its registry"
            ) from None
        digest, size, manifest = desc.digest, desc.size, store.read_manifest(desc)
    try:
        _, data = istore.resolve(ref)
    except NotInStoreError:
        raise NotInStoreError(
            f"could not find index {ref} in local storage; use 'kit index create' to create it"
        ) from None
    index = ix.parse(data, f"index {ref}")
    existing = index.get(digest)
    entry = ix.new_entry(
        digest, size, manifest, "" if model.digest else model.tag, {}, existing.annotations if existing else {}
    )
    entry.labels = _edited(existing.labels if existing else {}, labels, drop_labels)
    entry.annotations = _edited(entry.annotations, annotations, drop_annotations)
    index.add(entry)
    desc = istore.put(ref, index.to_bytes())
    print(f"Added {model} to index {ref} (digest {desc.digest})")
    return 0


def _edited(current: dict[str, str], to_set: dict[str, str], to_remove: list[str]) -> dict[str, str]:
    merged = {**current, **to_set}
    for key in to_remove:
        merged.pop(key, None)
    return merged


@_guard
def cmd_index_remove(args: argparse.Namespace) -> int:
    ref = _index_ref(args.index)
    model = parse(args.modelkit, default_tag=DEFAULT_TAG)
    store = LocalStore()
    istore = IndexStore(store)
    _, data = istore.resolve(ref)
    index = ix.parse(data, f"index {ref}")
    digest = model.digest
    if not digest:
        tagged = [e for e in index.entries if e.annotations.get(ix.mediatypes.ANNOTATION_ORIGINAL_TAG) == model.tag]
        if len(tagged) == 1:
            digest = tagged[0].digest
        else:
            with contextlib.suppress(StoreError):
                digest = store.resolve(model).digest
    if not digest or not index.remove(digest):
        print(f"Error: {model} is not in index {ref}", file=sys.stderr)
        return 1
    desc = istore.put(ref, index.to_bytes())
    print(f"Removed {model} from index {ref} (digest {desc.digest})")
    return 0


@_guard
def cmd_index_delete(args: argparse.Namespace) -> int:
    ref = _index_ref(args.index)
    desc = IndexStore(LocalStore()).delete(ref)
    print(f"Deleted index {ref} ({desc.digest})")
    return 0


@_guard
def cmd_index_list(args: argparse.Namespace) -> int:
    store = LocalStore()
    rows: list[dict[str, Any]] = []
    for stored in IndexStore(store).list():
        try:
            count: int | None = len(ix.parse(store.read_blob(stored.descriptor.digest), stored.repo_key).entries)
        except (ix.ModelKitIndexError, StoreError):
            count = None
        repo = listing.display_repository(stored.repo_key) or listing.NONE
        rows.append({"repo": repo, "digest": stored.descriptor.digest, "tags": list(stored.tags), "modelKits": count})
    rows.sort(key=lambda r: (r["repo"], r["digest"]))
    if args.format == "json":  # kit's indexListing: tags [] (never null), modelKits null when unreadable
        print(go_indent(go_marshal(rows)))
        return 0
    lines: list[tuple[str, ...]] = [("REPOSITORY", "TAG", "MODELKITS", "DIGEST")]
    for row in rows:
        count_text = listing.NONE if row["modelKits"] is None else str(row["modelKits"])
        lines += [(str(row["repo"]), tag, count_text, str(row["digest"])) for tag in row["tags"] or [listing.NONE]]
    widths = [max(len(line[i]) for line in lines) + 3 for i in range(3)]
    for line in lines:
        print("".join(c.ljust(w) for c, w in zip(line, widths, strict=False)) + line[-1])
    return 0


@_guard
def cmd_index_inspect(args: argparse.Namespace) -> int:
    ref = parse(args.index, default_tag=DEFAULT_TAG)
    if args.remote:
        with _client(args, ref.registry) as client:
            data, _, _ = indextransfer.fetch_index(client, ref)
    else:
        _, data = IndexStore(LocalStore()).resolve(ref)
    ix.parse(data, f"index {ref}")
    print(go_indent(data.decode()))
    return 0


@_guard
def cmd_index_push(args: argparse.Namespace) -> int:
    src = _index_ref(args.index)
    dest = _index_ref(args.destination) if args.destination else src
    with _client(args, dest.registry) as client:
        digest = indextransfer.push_index(IndexStore(LocalStore()), src, client, dest)
    print(f"Pushed index {digest}")
    return 0


@_guard
def cmd_index_pull(args: argparse.Namespace) -> int:
    ref = _index_ref(args.index)
    with _client(args, ref.registry) as client:
        digest = indextransfer.pull_index(IndexStore(LocalStore()), ref, client)
    print(f"Pulled index {digest}")
    return 0
