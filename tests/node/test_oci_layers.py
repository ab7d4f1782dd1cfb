"""Image layers unpacked into the node's cache (``embedded/node/oci/layers.py``, ``run.apply_layer``):
all or nothing, never outside the layer's directory, whiteouts as overlayfs' own."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from airflow_provider_training.embedded.node.oci import layers
from airflow_provider_training.embedded.node.oci.run import OPAQUE_XATTR, apply_layer

GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


def layer(
    tmp_path: Path, entries: list[tuple[tarfile.TarInfo, bytes]], name: str = "layer.tgz"
) -> tuple[Path, str, str]:
    """A gzip layer of ``entries``: its path, blob digest and diff_id."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    blob = gzip.compress(raw.getvalue())
    path = tmp_path / name
    path.write_bytes(blob)
    return path, "sha256:" + hashlib.sha256(blob).hexdigest(), "sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()


def entry(
    name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "", mode: int = 0o644, uid: int = 0
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode, info.uid, info.gid = kind, linkname, mode, uid, uid
    return info


def unpack(tmp_path: Path, entries: list[tuple[tarfile.TarInfo, bytes]], diff_id: str | None = None) -> Path:
    blob, digest, real_diff_id = layer(tmp_path, entries)
    target = tmp_path / "cache" / digest.split(":")[1]
    target.parent.mkdir(exist_ok=True)
    layers.unpack(blob, GZIP, digest, real_diff_id if diff_id is None else diff_id, target)
    return target


def left_in_cache(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "cache").iterdir()) if (tmp_path / "cache").exists() else []


def test_a_layer_keeps_modes_owners_links_and_makes_overlay_whiteouts(tmp_path):
    root = unpack(
        tmp_path,
        [
            (entry("usr/bin", tarfile.DIRTYPE, mode=0o755), b""),
            (entry("usr/bin/tool", mode=0o4755), b"#!/bin/sh\n"),
            (entry("usr/bin/alias", tarfile.LNKTYPE, "usr/bin/tool"), b""),
            (entry("bin", tarfile.SYMTYPE, "usr/bin"), b""),
            (entry("etc/abs", tarfile.SYMTYPE, "/etc/passwd"), b""),  # resolved inside the container
            (entry("home/trainer/notes", uid=1000), b"mine"),
            (entry("tmp", tarfile.DIRTYPE, mode=0o1777), b""),
            (entry("var/lib/.wh.gone"), b""),
            (entry("opt/.wh..wh..opq"), b""),
            (entry("dev/null", tarfile.CHRTYPE), b""),  # skipped: the runtime makes /dev
        ],
    )
    assert stat.S_IMODE((root / "usr/bin/tool").stat().st_mode) == 0o4755
    assert (root / "usr/bin/alias").stat().st_ino == (root / "usr/bin/tool").stat().st_ino
    assert os.readlink(root / "bin") == "usr/bin" and os.readlink(root / "etc/abs") == "/etc/passwd"
    assert stat.S_IMODE((root / "tmp").stat().st_mode) == 0o1777
    if os.geteuid() == 0:
        assert (root / "home/trainer/notes").stat().st_uid == 1000
        gone = (root / "var/lib/gone").lstat()
        assert stat.S_ISCHR(gone.st_mode) and gone.st_rdev == 0
        assert os.getxattr(root / "opt", OPAQUE_XATTR) == b"y"
    assert not (root / "dev/null").exists()


@pytest.mark.parametrize(
    "hostile",
    [
        [(entry("../escape"), b"x")],
        [(entry("a/../../escape"), b"x")],
        [(entry("link", tarfile.SYMTYPE, "/tmp"), b""), (entry("link/escape"), b"x")],
        [(entry("link", tarfile.SYMTYPE, "../.."), b""), (entry("link/escape"), b"x")],
        [(entry("hard", tarfile.LNKTYPE, "../../etc/passwd"), b"")],
        [(entry("hard", tarfile.LNKTYPE, "not/in/the/layer"), b"")],
        # a directory written into (known to be plain), then replaced by a symlink out, then written through
        [
            (entry("d", tarfile.DIRTYPE, mode=0o755), b""),
            (entry("d/first"), b"x"),
            (entry("d", tarfile.SYMTYPE, str(Path("/tmp"))), b""),
            (entry("d/escape"), b"x"),
        ],
    ],
    ids=[
        "dotdot",
        "nested-dotdot",
        "through-abs-symlink",
        "through-rel-symlink",
        "hardlink-out",
        "hardlink-missing",
        "dir-replaced-by-symlink",
    ],
)
def test_an_entry_that_would_leave_the_layer_is_refused_and_nothing_is_cached(tmp_path, hostile):
    with pytest.raises(layers.LayerError, match="layer sha256:"):
        unpack(tmp_path, [(entry("ok"), b"fine"), *hostile])
    assert left_in_cache(tmp_path) == []
    assert not (tmp_path / "escape").exists() and not Path("/tmp/escape").exists()


def test_content_that_does_not_match_the_diff_id_is_not_cached(tmp_path):
    with pytest.raises(layers.LayerError, match="not the image config's diff_id"):
        unpack(tmp_path, [(entry("file"), b"data")], diff_id="sha256:" + "0" * 64)
    assert left_in_cache(tmp_path) == []


def test_a_truncated_layer_is_not_cached(tmp_path):
    blob, digest, diff_id = layer(tmp_path, [(entry("big"), os.urandom(200_000))])
    blob.write_bytes(blob.read_bytes()[:50_000])
    (tmp_path / "cache").mkdir()
    with pytest.raises(layers.LayerError, match="corrupt or truncated"):
        layers.unpack(blob, GZIP, digest, diff_id, tmp_path / "cache" / "x")
    assert left_in_cache(tmp_path) == []


def test_an_unknown_media_type_is_refused_before_anything_is_read(tmp_path):
    with pytest.raises(layers.LayerError, match="not an image layer"):
        layers.compression_of("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", "sha256:" + "1" * 64)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_while_unpacking_leaves_nothing_and_says_so(tmp_path):
    blob, digest, diff_id = layer(tmp_path, [(entry(f"f{i}"), os.urandom(300_000)) for i in range(8)])
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], check=True)
    try:
        with pytest.raises(layers.LayerError, match="no space left on the device"):
            layers.unpack(blob, GZIP, digest, diff_id, small / "layer")
        assert list(small.iterdir()) == []
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            subprocess.run(["umount", str(small)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="whiteouts are character devices (mknod needs root)")
def test_the_copy_fallback_applies_whiteouts_as_overlay_would(tmp_path):
    bottom = unpack(tmp_path, [(entry("keep"), b"1"), (entry("drop"), b"2"), (entry("dir/old"), b"3")])
    top = unpack(tmp_path, [(entry(".wh.drop"), b""), (entry("dir/.wh..wh..opq"), b""), (entry("dir/new"), b"4")])
    merged = tmp_path / "merged"
    merged.mkdir()
    apply_layer(bottom, merged)
    apply_layer(top, merged)
    assert sorted(p.relative_to(merged).as_posix() for p in merged.rglob("*")) == ["dir", "dir/new", "keep"]
