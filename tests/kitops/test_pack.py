"""Packing: kit's pack-unpack and generation cases, tar bytes as Go's archive/tar writes them for kit,
manifest shape, store layout shared with kit, and unpack safety."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from airflow_provider_training.kitops import pack as packmod
from airflow_provider_training.kitops.generate import generate_kitfile
from airflow_provider_training.kitops.ignore import Ignore
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.reference import parse
from airflow_provider_training.kitops.tarlayer import Entry, header_blocks, write_layer
from airflow_provider_training.kitops.unpack import UnsafePathError, extract_layer, unpack
from tests.kitops.conftest import make_tree
from tests.paths import KITOPS_TESTDATA

DATA = KITOPS_TESTDATA
PACK_CASES = [
    *sorted((DATA / "kitops-v1.7.0/pack-unpack").glob("*.yaml")),
    DATA / "kitops-2026-01-fork-arnab2001/test_pack-model-with-prompts.yaml",
]
GEN_CASES = sorted((DATA / "kitops-v1.7.0/kitfile-generation").glob("*.yaml"))


def _norm(p: str) -> str:
    return os.path.normpath(p)


@pytest.mark.parametrize("case", PACK_CASES, ids=lambda p: p.stem)
def test_pack_unpack_cases(case: Path, tmp_path: Path, store: LocalStore) -> None:
    data = yaml.safe_load(case.read_text())
    ctx = tmp_path / "ctx"
    files = [_norm(f) for f in data.get("files") or []]
    ignored = [_norm(f) for f in data.get("ignored") or []]
    make_tree(ctx, {f: f"content of {f}\n" for f in files + ignored})
    (ctx / "Kitfile").write_text(data["kitfile"])
    if data.get("kitignore"):
        (ctx / ".kitignore").write_text(data["kitignore"])
    ref = parse("localhost/case:v1")
    packmod.pack(ctx, reference=ref, store=store)
    out = unpack(store, ref, tmp_path / "out")
    unpacked = sorted(
        str(p.relative_to(out.directory)) for p in out.directory.rglob("*") if p.is_file() and p.name != "Kitfile"
    )
    assert unpacked == sorted(files)


@pytest.mark.parametrize("case", GEN_CASES, ids=lambda p: p.stem)
def test_kitfile_generation_cases(case: Path, tmp_path: Path) -> None:
    data = yaml.safe_load(case.read_text())
    ctx = tmp_path / data["modelName"]
    make_tree(ctx, {f: f for f in data.get("files") or []})
    ctx.mkdir(exist_ok=True)
    kf = generate_kitfile(ctx, description=data.get("description"))
    got = yaml.safe_load(kf.to_yaml())
    assert got == data["expectedKitfile"]


def test_header_bytes_match_go_archive_tar(tmp_path: Path) -> None:
    blk = header_blocks(Entry("model/weights.bin", tmp_path, False, 0o644, 1234))
    assert len(blk) == 512
    assert blk[0:100].rstrip(b"\0") == b"model/weights.bin"
    assert blk[100:108] == b"0000644\0"
    assert blk[108:116] == b"0001750\0"  # uid 1000
    assert blk[116:124] == b"0000000\0"
    assert blk[124:136] == b"00000002322\0"
    assert blk[136:148] == b"00000000000\0"  # mtime 0
    assert blk[156:157] == b"0"
    assert blk[257:265] == b"ustar\x0000"
    assert blk[265:329] == b"\0" * 64  # empty uname/gname
    assert blk[329:345] == b"0000000\x000000000\0"  # devmajor/devminor written, not NUL-filled
    chk = sum(blk[:148]) + 8 * 32 + sum(blk[156:])
    assert blk[148:156] == f"{chk:06o}".encode() + b"\0 "
    d = header_blocks(Entry("model", tmp_path, True, 0o755, 0))
    assert d[0:6] == b"model\0" and d[156:157] == b"5"  # no trailing slash on directories


def test_long_names_split_like_go_and_non_ascii_uses_pax(tmp_path: Path) -> None:
    long = "d" * 60 + "/" + "e" * 60 + "/" + "f.bin"
    blk = header_blocks(Entry(long, tmp_path, False, 0o644, 0))
    assert blk[345:500].rstrip(b"\0") == ("d" * 60 + "/" + "e" * 60).encode()
    assert blk[0:100].rstrip(b"\0") == b"f.bin"
    pax = header_blocks(Entry("docs/naïve.md", tmp_path, False, 0o644, 0))
    assert pax[0:100].rstrip(b"\0") == b"docs/PaxHeaders.0/nave.md"
    assert pax[156:157] == b"x"
    assert pax[329:345] == b"\0" * 16
    assert pax[512:].startswith("23 path=docs/naïve.md\n".encode())  # length counts bytes and itself
    assert pax[1024:1124].rstrip(b"\0") == b"docs/nave.md"


def test_layer_is_readable_unpadded_and_deterministic(tmp_path: Path) -> None:
    ctx = make_tree(tmp_path / "c", {"model/a.bin": b"x" * 700, "model/sub/b.txt": "b", "other/z": "z"})
    os.chmod(ctx / "model/a.bin", 0o600)
    ignore = Ignore.load(ctx, ["model"])
    buf = io.BytesIO()
    blob = write_layer(ctx, "model", ignore, buf)
    raw = buf.getvalue()
    assert blob.digest == blob.diff_id == "sha256:" + hashlib.sha256(raw).hexdigest()
    # 4 headers + 2 data blocks for a.bin + 1 for b.txt + 2 end blocks; no 10240-byte record padding
    assert len(raw) == 512 * (4 + 2 + 1 + 2)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        members = [(m.name, m.mode, m.uid, m.mtime) for m in tar]
    assert members == [
        ("model", 0o755, 1000, 0),
        ("model/a.bin", 0o600, 1000, 0),
        ("model/sub", 0o755, 1000, 0),
        ("model/sub/b.txt", 0o644, 1000, 0),
    ]
    listing = subprocess.run(["tar", "tf", "-"], input=raw, capture_output=True, check=True).stdout.decode()
    assert listing.split() == ["model", "model/a.bin", "model/sub", "model/sub/b.txt"]
    again = io.BytesIO()
    assert write_layer(ctx, "model", ignore, again).digest == blob.digest


@pytest.mark.parametrize("compression", ["gzip", "gzip-fastest", "zstd"])
def test_compressed_layers_keep_diff_id(compression: str, tmp_path: Path, store: LocalStore) -> None:
    ctx = make_tree(tmp_path / "c", {"Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: m\n", "m/w": b"w" * 5000})
    plain = packmod.pack(ctx, reference=parse("localhost/p:none"), store=store)
    packed = packmod.pack(ctx, reference=parse(f"localhost/p:{compression}"), store=store, compression=compression)
    assert packed.layers[0].diff_id == plain.layers[0].diff_id
    assert packed.layers[0].digest != plain.layers[0].digest
    suffix = "+zstd" if compression == "zstd" else "+gzip"
    assert packed.layers[0].media_type == "application/vnd.kitops.modelkit.model.v1.tar" + suffix
    out = unpack(store, parse(f"localhost/p:{compression}"), tmp_path / compression)
    assert (out.directory / "m/w").read_bytes() == b"w" * 5000
    if compression.startswith("gzip"):
        head = store.read_blob(packed.layers[0].digest)[:10]
        assert head == b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + bytes([4 if compression == "gzip-fastest" else 0, 255])


def test_manifest_and_config_shape(model_dir: Path, store: LocalStore) -> None:
    res = packmod.pack(model_dir, reference=parse("localhost/ml/mnist:v1,latest"), store=store)
    manifest = json.loads(res.manifest)
    assert list(manifest) == ["schemaVersion", "artifactType", "config", "layers", "annotations"]
    assert [layer["annotations"]["org.cncf.model.filepath"] for layer in manifest["layers"]] == [
        "model",
        "src",
        "data/train.csv",
    ]
    assert manifest["annotations"]["ml.kitops.modelkit.cli-version"].startswith("airflow-provider-training/")
    assert b" " not in res.manifest
    config = json.loads(store.read_blob(manifest["config"]["digest"]))
    assert config["model"]["digest"] == manifest["layers"][0]["digest"]
    assert config["code"][0]["diffId"] == manifest["layers"][1]["digest"]
    again = packmod.pack(model_dir, reference=parse("localhost/ml/mnist:v2"), store=store)
    assert again.digest == res.digest  # reproducible: no timestamps


def test_store_layout_is_kits(model_dir: Path, store: LocalStore) -> None:
    res = packmod.pack(model_dir, reference=parse("localhost/myrepo:v1"), store=store)
    root = store.root
    assert json.loads((root / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    base = "bG9jYWxob3N0L215cmVwbw=="  # base64url("localhost/myrepo") with padding, as kit names it
    assert base64.urlsafe_b64decode(base) == b"localhost/myrepo"
    tags = json.loads((root / f"{base}-tags.json").read_text())
    assert tags["v1"]["digest"] == res.digest
    index = json.loads((root / f"{base}-index.json").read_text())
    assert index["manifests"][0]["digest"] == res.digest and "mediaType" not in index
    shared = json.loads((root / "index.json").read_text())
    assert any(m["digest"] == res.digest for m in shared["manifests"])
    for layer in res.layers:
        assert (root / "blobs/sha256" / layer.digest.split(":")[1]).is_file()
    assert [(k.repo_key, k.tags) for k in store.list()] == [("localhost/myrepo", ("v1",))]
    store.remove(parse("localhost/myrepo:v1"))
    assert store.list() == []
    assert not any((root / "blobs/sha256").iterdir())


def test_model_reference_packs_no_model_layer(model_dir: Path, store: LocalStore, tmp_path: Path) -> None:
    packmod.pack(model_dir, reference=parse("localhost/base:v1"), store=store)
    child = make_tree(
        tmp_path / "child",
        {
            "Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: localhost/base:v1\n  parts:\n    - path: adapter\n",
            "adapter/lora.bin": "lora",
        },
    )
    res = packmod.pack(child, reference=parse("localhost/child:v1"), store=store)
    assert [layer.kind for layer in res.layers] == ["modelpart"]
    out = unpack(store, parse("localhost/child:v1"), tmp_path / "out")
    assert (out.directory / "model/weights.bin").is_file()  # parent's model unpacked first
    assert (out.directory / "adapter/lora.bin").read_text() == "lora"


def _evil_tar(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = link
        info.size = 0
        tar.addfile(info, io.BytesIO(b""))
    return buf.getvalue()


@pytest.mark.parametrize(
    ("name", "kind", "link"),
    [
        ("../escape.txt", tarfile.REGTYPE, ""),
        ("/etc/evil", tarfile.REGTYPE, ""),
        ("a/../../x", tarfile.REGTYPE, ""),
        ("link", tarfile.SYMTYPE, "/etc/passwd"),
    ],
)
def test_unpack_refuses_unsafe_entries(name: str, kind: bytes, link: str, tmp_path: Path) -> None:
    with pytest.raises(UnsafePathError):
        extract_layer(
            io.BytesIO(_evil_tar(name, kind, link)),
            "application/vnd.kitops.modelkit.code.v1.tar",
            tmp_path / "dest",
            False,
            False,
        )
    assert not (tmp_path / "escape.txt").exists()


def test_unpack_refuses_symlink_escape_on_disk(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    (tmp_path / "outside").mkdir()
    (dest / "model").symlink_to(tmp_path / "outside")
    with pytest.raises(UnsafePathError, match="symlink"):
        extract_layer(
            io.BytesIO(_evil_tar("model/x")),
            "application/vnd.kitops.modelkit.model.v1.tar",
            dest,
            False,
            False,
        )
    assert not (tmp_path / "outside/x").exists()


def test_unpack_filters(model_dir: Path, store: LocalStore, tmp_path: Path) -> None:
    packmod.pack(model_dir, reference=parse("localhost/f:v1"), store=store)
    out = unpack(store, parse("localhost/f:v1"), tmp_path / "o", filters=["model"])
    names = sorted(str(p.relative_to(out.directory)) for p in out.directory.rglob("*") if p.is_file())
    assert names == ["model/config.json", "model/weights.bin"]
