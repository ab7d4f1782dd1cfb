"""Fault tests against the real registry: killed mid-push, corrupted blob, disk full."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from airflow_provider_training.kitops import pack as packmod
from airflow_provider_training.kitops import transfer
from airflow_provider_training.kitops.localstore import LocalStore, StoreError
from airflow_provider_training.kitops.reference import parse
from airflow_provider_training.kitops.registry import DigestMismatchError, NotFoundError, RegistryError
from airflow_provider_training.kitops.unpack import unpack
from tests.kitops.conftest import make_tree

KIB = 1024


def _big_model(tmp_path: Path, size: int = 3 * 1024 * KIB) -> Path:
    return make_tree(
        tmp_path / "big",
        {
            "Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: model\n",
            "model/weights.bin": bytes(i % 251 for i in range(size)),
        },
    )


def test_registry_killed_mid_push_resumes_and_completes(registry_factory, client_for, store, tmp_path):
    reg = registry_factory()
    ctx = _big_model(tmp_path)
    ref = parse(f"{reg.host}/ml-models/resume:v1")
    packmod.pack(ctx, reference=ref, store=store)
    client = client_for(reg, chunk_size=256 * KIB, monolithic_below=256 * KIB, retries=8)
    sent = {"n": 0, "killed": False}
    restarter: list[threading.Thread] = []

    def progress(n: int) -> None:
        sent["n"] += n
        if sent["n"] > 1024 * KIB and not sent["killed"]:
            sent["killed"] = True
            reg.kill()
            t = threading.Thread(target=reg.start)
            t.start()
            restarter.append(t)

    result = transfer.push(store, ref, client, progress=progress)
    for t in restarter:
        t.join()
    assert sent["killed"]
    # resumed, not restarted from zero: far less than two full uploads went over the wire
    assert sent["n"] < 2 * 3 * 1024 * KIB
    other = LocalStore(tmp_path / "fresh")
    transfer.pull(other, ref, client_for(reg))
    out = unpack(other, ref, tmp_path / "out")
    assert (out.directory / "model/weights.bin").read_bytes() == (ctx / "model/weights.bin").read_bytes()
    assert result.digest == other.resolve(ref).digest


def test_failed_push_leaves_no_tag(registry_factory, client_for, store, tmp_path):
    reg = registry_factory()
    ctx = _big_model(tmp_path, 1024 * KIB)
    ref = parse(f"{reg.host}/ml-models/dangling:v1")
    packmod.pack(ctx, reference=ref, store=store)
    client = client_for(reg, chunk_size=128 * KIB, monolithic_below=128 * KIB, retries=2)
    state = {"n": 0}

    def progress(n: int) -> None:
        state["n"] += n
        if state["n"] > 256 * KIB and reg.process.poll() is None:
            reg.kill()  # stays down: the push must fail

    with pytest.raises(RegistryError):
        transfer.push(store, ref, client, progress=progress)
    reg.start()
    with pytest.raises(NotFoundError):
        client_for(reg).get_manifest("ml-models/dangling", "v1")


def test_corrupted_blob_is_detected_on_pull(registry_factory, client_for, store, model_dir, tmp_path):
    reg = registry_factory()
    ref = parse(f"{reg.host}/ml-models/corrupt:v1")
    res = packmod.pack(model_dir, reference=ref, store=store)
    transfer.push(store, ref, client_for(reg))
    data = reg.blob_data(res.layers[0].digest)
    raw = bytearray(data.read_bytes())
    raw[600] ^= 0xFF
    data.write_bytes(bytes(raw))
    other = LocalStore(tmp_path / "fresh")
    with pytest.raises(DigestMismatchError, match="does not match its digest"):
        transfer.pull(other, ref, client_for(reg))
    assert not other.has_blob(res.layers[0].digest)
    assert other.list() == []


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


def test_disk_full_during_pack_is_clear_and_store_consistent(tiny_disk, tmp_path):
    store = LocalStore(tiny_disk / "home")
    small = make_tree(tmp_path / "small", {"Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: m\n", "m/w": "ok"})
    packmod.pack(small, reference=parse("localhost/small:v1"), store=store)
    before = sorted(p.name for p in store.root.iterdir())
    ctx = _big_model(tmp_path, 2048 * KIB)
    with pytest.raises(StoreError, match="not enough disk space"):
        packmod.pack(ctx, reference=parse("localhost/big:v1"), store=store)
    assert sorted(p.name for p in store.root.iterdir()) == before
    assert [k.repo_key for k in store.list()] == ["localhost/small"]
    assert not any((store.home / "cache/pack").iterdir())
    shared = json.loads((store.root / "index.json").read_text())
    assert len(shared["manifests"]) == 1
    out = unpack(store, parse("localhost/small:v1"), tmp_path / "out")
    assert (out.directory / "m/w").read_text() == "ok"
