"""Unpack faults: a corrupt, truncated or non-gzip layer, or a full disk, fails with one line naming
the layer digest (and the file), leaves no temp files and no half-written layer, and keeps the
user's own files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from airflow_provider_training.cli.main import main as cli
from airflow_provider_training.kitops import pack as packmod
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.reference import parse
from airflow_provider_training.kitops.unpack import TEMP_SUFFIX, UnpackError, unpack
from tests.kitops.conftest import make_tree

REF = parse("localhost/faults:v1")


def _model_layer(store: LocalStore, ref=REF) -> dict:
    manifest = store.read_manifest(store.resolve(ref))
    return manifest["layers"][0]


def _user_dir(tmp_path: Path) -> Path:
    """An unpack target holding the user's own files, two of which the ModelKit also contains."""
    return make_tree(
        tmp_path / "out",
        {"model/config.json": "USER'S OWN CONFIG", "notes.txt": "mine", "model/extra.bin": "keep"},
    )


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _no_temp_files(root: Path) -> bool:
    return not [p for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIX)]


@pytest.mark.parametrize("fault", ["flipped byte", "truncated", "not gzip"])
def test_corrupt_layer_fails_naming_the_digest_and_keeps_user_files(fault, store, model_dir, tmp_path):
    compression = "gzip" if fault == "not gzip" else "none"
    packmod.pack(model_dir, reference=REF, store=store, compression=compression)
    layer = _model_layer(store)
    blob = store.blob_path(layer["digest"])
    data = bytearray(blob.read_bytes())
    if fault == "flipped byte":
        data[len(data) // 2] ^= 0xFF  # inside weights.bin: the tar still parses, the digest does not match
    elif fault == "truncated":
        data = data[: len(data) // 2]
    else:
        data = bytearray(b"PK\x03\x04 this is a zip, not gzip" + bytes(600))
    blob.write_bytes(bytes(data))
    out = _user_dir(tmp_path)
    before = _snapshot(out)

    with pytest.raises(UnpackError) as err:
        unpack(store, REF, out, overwrite=True)
    message = str(err.value)
    assert "\n" not in message
    assert layer["digest"] in message
    expected = {
        "flipped byte": "does not match its digest",
        "truncated": "corrupt or truncated",
        "not gzip": "corrupt or truncated",
    }[fault]
    assert expected in message
    assert _snapshot(out) == before
    assert _no_temp_files(out)
    assert not (out / "model/weights.bin").exists()


def test_cli_prints_one_line(store, model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KITOPS_HOME", str(store.home))
    packmod.pack(model_dir, reference=REF, store=store)
    layer = _model_layer(store)
    store.blob_path(layer["digest"]).write_bytes(b"\0" * 700)
    assert cli(["kit", "unpack", str(REF), "-d", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("Error: ") and layer["digest"] in err


@pytest.fixture
def tiny_disk(tmp_path: Path):
    mount = tmp_path / "tiny"
    mount.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {proc.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False, stdin=subprocess.DEVNULL)


def test_full_disk_names_layer_and_file_and_cleans_up(tiny_disk, store, tmp_path):
    ctx = make_tree(
        tmp_path / "big",
        {
            "Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: model\ndocs:\n  - path: README.md\n",
            "model/a-small.json": "{}",
            "model/weights.bin": bytes(i % 251 for i in range(2 << 20)),
            "README.md": "read me",
        },
    )
    packmod.pack(ctx, reference=REF, store=store)
    layer = _model_layer(store)
    out = make_tree(tiny_disk / "out", {"model/a-small.json": "USER", "mine.txt": "keep"})
    before = _snapshot(out)
    with pytest.raises(UnpackError) as err:
        unpack(store, REF, out, overwrite=True)
    message = str(err.value)
    assert "not enough disk space" in message and layer["digest"] in message
    assert "model/weights.bin" in message and "\n" not in message
    assert _no_temp_files(out)
    assert _snapshot(out) == before  # a-small.json was staged, then discarded with the layer
    # the disk is usable again: a filtered unpack of the docs fits
    assert unpack(store, REF, out, filters=["docs"]).files == 1
    assert (out / "model/a-small.json").read_text() == "USER"


def _tar_with(path: Path, name: str, mode: int, data: bytes = b"#!/bin/sh\n") -> Path:
    import io
    import tarfile

    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.uid, info.uname = len(data), mode, 0, "root"
        tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("layer_format", ["tar", "raw"])
def test_setuid_and_world_writable_bits_are_dropped_as_the_data_filter_does(layer_format, store, model_dir, tmp_path):
    """A -rwsrwsrwx file in an untrusted ModelKit unpacks as -rwxr-xr-x (tarfile.data_filter)."""
    import stat

    from airflow_provider_training.kitops.unpack import extract_layer

    out = tmp_path / "out"
    out.mkdir()
    if layer_format == "tar":
        blob = _tar_with(tmp_path / "layer.tar", "model/run.sh", 0o7777)
        with open(blob, "rb") as fh:
            extract_layer(fh, "application/vnd.kitops.modelkit.model.v1.tar", out, False, False)
    else:
        import io
        import json

        layer = {
            "mediaType": "application/vnd.cncf.model.weight.v1.raw",
            "annotations": {
                "org.cncf.model.filepath": "model/run.sh",
                "org.cncf.model.file.metadata+json": json.dumps({"mode": 0o7777}),
            },
        }
        extract_layer(io.BytesIO(b"#!/bin/sh\n"), layer, out, False, False)
    mode = stat.S_IMODE((out / "model/run.sh").stat().st_mode)
    assert oct(mode) == oct(0o755)


def _tar_of(path: Path, entries: list[tuple[str, bytes]]) -> Path:
    import io
    import tarfile

    with tarfile.open(path, "w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return path


def test_duplicate_entries_are_last_wins(tmp_path):
    from airflow_provider_training.kitops.unpack import extract_layer

    out = tmp_path / "out"
    out.mkdir()
    blob = _tar_of(tmp_path / "l.tar", [("model/a.txt", b"first"), ("model/a.txt", b"second")])
    with open(blob, "rb") as fh:
        assert extract_layer(fh, "application/vnd.kitops.modelkit.model.v1.tar", out, False, False) == 1
    assert (out / "model/a.txt").read_text() == "second"
    assert _no_temp_files(out)


def test_a_file_followed_by_file_slash_child_is_refused_whole(tmp_path):
    from airflow_provider_training.kitops.unpack import extract_layer

    out = make_tree(tmp_path / "out", {"mine.txt": "keep"})
    before = _snapshot(out)
    blob = _tar_of(tmp_path / "l.tar", [("model/ok.txt", b"x"), ("model/w", b"file"), ("model/w/child", b"y")])
    layer = {"mediaType": "application/vnd.kitops.modelkit.model.v1.tar", "digest": "sha256:" + "0" * 64}
    with open(blob, "rb") as fh, pytest.raises(UnpackError) as err:
        extract_layer(fh, layer, out, False, False)
    message = str(err.value)
    assert layer["digest"] in message and "'model/w/child'" in message and "\n" not in message
    assert _snapshot(out) == before and _no_temp_files(out)
    assert not (out / "model").exists()


@pytest.mark.parametrize("mode", [0o4777, 0o2755, 0o1777, 0o640, 0o000, 0o100, 0o777, 0o644])
def test_the_filter_by_hand_gives_the_modes_pep_706_gives(mode, tmp_path):
    """Where tarfile has no filters (Debian bookworm's Python 3.11.2, the images' base) the unpack
    applies the data filter's mode rules itself, with the same result."""
    import tarfile

    from airflow_provider_training.kitops import unpack as unpackmod

    member = tarfile.TarInfo("model.bin")
    member.mode = mode
    assert unpackmod._data_filtered_by_hand(member).mode == tarfile.data_filter(member, str(tmp_path)).mode
    directory = tarfile.TarInfo("dir")
    directory.type, directory.mode = tarfile.DIRTYPE, mode
    assert unpackmod._data_filtered_by_hand(directory).mode == tarfile.data_filter(directory, str(tmp_path)).mode
