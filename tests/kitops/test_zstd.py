"""zstd layers (kit >= 1.15 ``--compression zstd``): media types, kit's frame parameters, the tar
inside byte-identical to kit's, a round trip through the real registry, and hostile layers."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest
import zstandard

from airflow_provider_training.cli.main import main as cli
from airflow_provider_training.kitops import mediatypes, transfer
from airflow_provider_training.kitops import pack as packmod
from airflow_provider_training.kitops.compression import ZSTD_BLOCK, ExpansionLimit
from airflow_provider_training.kitops.localstore import Descriptor, LocalStore
from airflow_provider_training.kitops.reference import parse
from airflow_provider_training.kitops.unpack import TEMP_SUFFIX, UnpackError, unpack
from tests.kitops.conftest import make_tree

KITFILE = "manifestVersion: 1.0.0\nmodel:\n  path: model\n"


def _go_tar_header(name: str, mode: int, size: int, typeflag: bytes) -> bytes:
    """A USTAR header as Go's archive/tar writes kit's sanitized header (kitops.md §2.6), built
    field by field here, independently of the writer under test."""
    blk = bytearray(512)
    blk[0 : len(name)] = name.encode()
    blk[100:108] = f"{mode:07o}\0".encode()
    blk[108:116] = b"0001750\0"  # uid 1000
    blk[116:124] = b"0000000\0"  # gid 0
    blk[124:136] = f"{size:011o}\0".encode()
    blk[136:148] = b"00000000000\0"  # zero mtime
    blk[156:157] = typeflag
    blk[257:265] = b"ustar\x0000"
    blk[329:345] = b"0000000\x000000000\0"  # devmajor/devminor written as zeros, not NUL-filled
    blk[148:156] = b" " * 8
    blk[148:156] = f"{sum(blk):06o}\0 ".encode()
    return bytes(blk)


def _klauspost_header(content: int) -> bytes:
    """The frame header klauspost/compress/zstd (what kit links) writes for a tar of ``content``
    bytes with its default writer: ``EncodeAll`` below one 128 KiB block (content size, single
    segment above 1 KiB), else the streaming header (8 MiB window, no content size); CRC on
    (zstd/encoder.go nextBlock/encodeAll, zstd/frameenc.go appendTo)."""
    magic = b"\x28\xb5\x2f\xfd"
    if content >= 128 << 10:
        return magic + bytes([1 << 2, (23 - 10) << 3])
    fcs = (content >= 256) + (content >= 65536 + 256) + (content >= 0xFFFFFFFF)
    single = content > 1024
    fhd = (fcs << 6) | (single << 5) | (1 << 2)
    size = content - 256 if fcs == 1 else content
    field = size.to_bytes({0: 1 if single else 0, 1: 2, 2: 4, 3: 8}[fcs], "little")
    window = b"" if single else bytes([(max(10, content.bit_length()) - 10) << 3])
    return magic + bytes([fhd]) + window + field


def _tree(tmp_path: Path, weights: bytes) -> Path:
    ctx = make_tree(tmp_path / "ctx", {"Kitfile": KITFILE, "model/w.bin": weights})
    os.chmod(ctx / "model", 0o755)
    os.chmod(ctx / "model/w.bin", 0o644)
    return ctx


@pytest.mark.parametrize("weights", [b"weights\n", bytes(range(256)) * 1024], ids=["one-block", "streamed"])
def test_zstd_modelkit_matches_kits_bytes_where_kit_is_reproducible(weights, tmp_path, store):
    """The tar (diffId), media types, frame parameters, config and manifest are kit's; only the
    zstd blocks differ (kit links a different encoder), and with them the layer digest."""
    ctx = _tree(tmp_path, weights)
    res = packmod.pack(ctx, reference=parse("localhost/zstd:v1"), store=store, compression="zstd")
    tar = (
        _go_tar_header("model", 0o755, 0, b"5")
        + _go_tar_header("model/w.bin", 0o644, len(weights), b"0")
        + weights
        + b"\0" * (-len(weights) % 512)
        + b"\0" * 1024
    )
    layer = res.layers[0]
    assert layer.diff_id == "sha256:" + hashlib.sha256(tar).hexdigest()
    assert layer.media_type == "application/vnd.kitops.modelkit.model.v1.tar+zstd"
    blob = store.read_blob(layer.digest)
    assert blob.startswith(_klauspost_header(len(tar)))
    assert zstandard.ZstdDecompressor().decompressobj().decompress(blob) == tar
    assert zstandard.get_frame_parameters(blob).has_checksum

    config = (
        '{"manifestVersion":"1.0.0","package":{},"model":{"path":"model",'
        f'"digest":"{layer.digest}","diffId":"{layer.diff_id}"}}}}'
    ).encode()
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    assert store.read_blob(res.config_digest) == config and res.config_digest == config_digest
    manifest = (
        '{"schemaVersion":2,"artifactType":"application/vnd.kitops.modelkit.manifest.v1+json",'
        f'"config":{{"mediaType":"application/vnd.kitops.modelkit.config.v1+json","digest":"{config_digest}",'
        f'"size":{len(config)}}},"layers":[{{"mediaType":"application/vnd.kitops.modelkit.model.v1.tar+zstd",'
        f'"digest":"{layer.digest}","size":{len(blob)},"annotations":{{"org.cncf.model.filepath":"model"}}}}],'
        f'"annotations":{{"ml.kitops.modelkit.cli-version":"{packmod.CLI_VERSION}"}}}}'
    ).encode()
    assert res.manifest == manifest and res.digest == "sha256:" + hashlib.sha256(manifest).hexdigest()
    again = packmod.pack(ctx, reference=parse("localhost/zstd:v2"), store=store, compression="zstd")
    assert again.digest == res.digest  # deterministic, as kit is


def test_frame_header_follows_the_block_boundary(tmp_path):
    """A tar of exactly one block is streamed (klauspost encodes a block once 128 KiB are filled);
    one byte less is written in one go with its size."""
    from airflow_provider_training.kitops.compression import KitZstdWriter

    for size in (ZSTD_BLOCK - 1, ZSTD_BLOCK, 1024, 1536):
        out = io.BytesIO()
        writer = KitZstdWriter(out)
        data = bytes(size)
        writer.write(data[:700])
        writer.write(data[700:])
        writer.close()
        assert out.getvalue().startswith(_klauspost_header(size)), size
        assert zstandard.ZstdDecompressor().decompressobj().decompress(out.getvalue()) == data


def test_modelpack_zstd_media_types(tmp_path, store):
    ctx = make_tree(
        tmp_path / "mp",
        {"Kitfile": KITFILE + "docs:\n  - path: README.md\n", "model/w.bin": b"w" * 3000, "README.md": "hi"},
    )
    res = packmod.pack(ctx, reference=parse("localhost/mp:zstd"), store=store, compression="zstd", modelpack=True)
    assert [layer.media_type for layer in res.layers] == [
        "application/vnd.cncf.model.weight.v1.tar+zstd",
        "application/vnd.cncf.model.doc.v1.tar+zstd",
    ]
    out = unpack(store, parse("localhost/mp:zstd"), tmp_path / "out")
    assert (out.directory / "model/w.bin").read_bytes() == b"w" * 3000


def test_zstd_roundtrip_through_the_registry(registry, client_for, store, tmp_path):
    ctx = _tree(tmp_path, bytes(range(256)) * 2048)
    make_tree(ctx, {"data/train.csv": "a,b\n" * 5000})
    (ctx / "Kitfile").write_text(KITFILE + "datasets:\n  - name: train\n    path: data/train.csv\n")
    ref = parse(f"{registry.host}/ml-models/zstd:v1")
    packed = packmod.pack(ctx, reference=ref, store=store, compression="zstd")
    client = client_for(registry)
    assert transfer.push(store, ref, client).digest == packed.digest

    other = LocalStore(tmp_path / "other")
    pulled = transfer.pull(other, ref, client)
    assert pulled.digest == packed.digest
    for layer in packed.layers:  # every blob byte-identical after the round trip
        assert other.read_blob(layer.digest) == store.read_blob(layer.digest)
    out = unpack(other, ref, tmp_path / "out")
    assert (out.directory / "model/w.bin").read_bytes() == (ctx / "model/w.bin").read_bytes()
    assert (out.directory / "data/train.csv").read_bytes() == (ctx / "data/train.csv").read_bytes()
    assert [layer["mediaType"] for layer in transfer.inspect_remote(client, ref)["manifest"]["layers"]] == [
        "application/vnd.kitops.modelkit.model.v1.tar+zstd",
        "application/vnd.kitops.modelkit.dataset.v1.tar+zstd",
    ]


# -- hostile layers ----------------------------------------------------------------------------


def _craft(store: LocalStore, ref_text: str, blob: bytes, media_type: str) -> dict:
    """A ModelKit in the store whose one model layer is ``blob`` (config and manifest consistent)."""
    digest = store.put_bytes(blob)
    config = json.dumps(
        {"manifestVersion": "1.0.0", "model": {"path": "model", "digest": digest, "diffId": digest}},
        separators=(",", ":"),
    ).encode()
    layer = {
        "mediaType": media_type,
        "digest": digest,
        "size": len(blob),
        "annotations": {mediatypes.ANNOTATION_FILEPATH: "model"},
    }
    manifest = {
        "schemaVersion": 2,
        "artifactType": mediatypes.ARTIFACT_TYPE,
        "config": {"mediaType": mediatypes.CONFIG, "digest": store.put_bytes(config), "size": len(config)},
        "layers": [layer],
    }
    data = json.dumps(manifest, separators=(",", ":")).encode()
    ref = parse(ref_text)
    store.add_manifest(ref.repo_key, Descriptor(mediatypes.MANIFEST, store.put_bytes(data), len(data)), [ref.tag])
    return layer


def _bomb(expanded: int) -> bytes:
    """A zstd tar holding one file of ``expanded`` zero bytes, compressed as a stream (a few KiB)."""
    info = tarfile.TarInfo("model/zeros.bin")
    info.size = expanded
    out = io.BytesIO()
    writer = zstandard.ZstdCompressor(level=3).stream_writer(out, closefd=False)
    writer.write(info.tobuf(tarfile.USTAR_FORMAT))
    chunk = bytes(1 << 20)
    for _ in range(expanded >> 20):
        writer.write(chunk)
    writer.write(bytes(1024))
    writer.close()
    return out.getvalue()


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_zstd_decompression_bomb_is_bounded_and_leaves_nothing(store, tmp_path):
    blob = _bomb(256 << 20)
    assert len(blob) < 64 << 10  # 256 MiB of zeros in a few KiB
    layer = _craft(store, "localhost/bomb:v1", blob, "application/vnd.kitops.modelkit.model.v1.tar+zstd")
    out = make_tree(tmp_path / "out", {"mine.txt": "keep"})
    before = _snapshot(out)
    with pytest.raises(UnpackError) as err:
        unpack(store, parse("localhost/bomb:v1"), out, limit=ExpansionLimit(ratio=100, floor=4 << 20))
    message = str(err.value)
    assert layer["digest"] in message and "decompression bomb" in message
    assert "nothing from it was written" in message and "\n" not in message
    assert _snapshot(out) == before
    assert not [p for p in out.rglob("*") if p.name.endswith(TEMP_SUFFIX)]
    assert not (out / "model").exists()


def test_bomb_limit_from_the_environment_on_the_cli(store, tmp_path, monkeypatch, capsys):
    layer = _craft(store, "localhost/bomb:env", _bomb(64 << 20), "application/vnd.kitops.modelkit.model.v1.tar+zstd")
    monkeypatch.setenv("KITOPS_HOME", str(store.home))
    monkeypatch.setenv("AIRFLOW_TRAINING_KIT_MAX_EXPANSION", "10:1048576")
    assert cli(["kit", "unpack", "localhost/bomb:env", "-d", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("Error: ") and layer["digest"] in err and "AIRFLOW_TRAINING_KIT_MAX_EXPANSION" in err
    monkeypatch.setenv("AIRFLOW_TRAINING_KIT_MAX_EXPANSION", "100000")  # a genuine 64 MiB of zeros
    assert cli(["kit", "unpack", "localhost/bomb:env", "-d", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o/model/zeros.bin").stat().st_size == 64 << 20


def test_a_frame_asking_for_a_huge_window_is_refused(store, tmp_path):
    # magic, FHD (checksum), window descriptor for 2 GiB, then one empty last raw block
    blob = b"\x28\xb5\x2f\xfd\x04" + bytes([(31 - 10) << 3]) + b"\x01\x00\x00"
    layer = _craft(store, "localhost/window:v1", blob, "application/vnd.kitops.modelkit.model.v1.tar+zstd")
    with pytest.raises(UnpackError) as err:
        unpack(store, parse("localhost/window:v1"), tmp_path / "out")
    assert layer["digest"] in str(err.value) and "corrupt or truncated" in str(err.value)


@pytest.mark.parametrize("suffix", ["+lz4", "+brotli"])
def test_unknown_compression_media_type_is_named(suffix, store, tmp_path):
    media_type = "application/vnd.kitops.modelkit.model.v1.tar" + suffix
    _craft(store, "localhost/unknown:v1", b"whatever", media_type)
    with pytest.raises(UnpackError) as err:
        unpack(store, parse("localhost/unknown:v1"), tmp_path / "out")
    assert media_type in str(err.value) and f"unknown compression {suffix}" in str(err.value)
    assert not (tmp_path / "out/model").exists()


def test_none_suffix_is_read_as_kit_reads_it(store, tmp_path):
    """kit's ParseCompression takes ``none`` as well as no suffix."""
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as tf:
        info = tarfile.TarInfo("model/a.txt")
        info.size = 2
        tf.addfile(info, io.BytesIO(b"hi"))
    _craft(store, "localhost/none:v1", tar.getvalue(), "application/vnd.kitops.modelkit.model.v1.tar+none")
    assert unpack(store, parse("localhost/none:v1"), tmp_path / "out").files == 1
