"""Unpack one image layer (a tar, plain, gzip or zstd) into a directory of its own, all or nothing,
with the unpack safety rules of ``kitops.unpack`` adapted to root file systems.

Every entry must be a relative path without ``..`` that stays inside the directory after resolving
what is already on disk (no entry is written through a symlink); a hard link must point at an entry
of the same layer; device nodes are skipped (a runtime makes ``/dev``; one elsewhere would reach the
host's devices). Symlinks may point anywhere:
they are resolved inside the container. Owners, modes (setuid included), times and the file
capabilities of ``security.capability`` are kept, as a container runtime keeps them.

Whiteouts become overlayfs' own: ``.wh.NAME`` a 0/0 character device ``NAME``, ``.wh..wh..opq`` the
``trusted.overlay.opaque`` attribute of its directory, so the unpacked layers stack as overlay lower
directories as they are (``stack.py`` applies them itself where overlay is unavailable).

The layer is written into ``<target>.partial-<pid>`` and renamed to ``target`` once the whole tar
was read and the digest of its uncompressed bytes equals the image config's ``diff_id``: a corrupt
or truncated layer, or a full disk, leaves nothing in the cache (the partial directory is removed).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import posixpath
import shutil
import stat
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from airflow_provider_training.kitops.compression import DecompressionBombError, ExpansionLimit, open_decompressed

WHITEOUT_PREFIX = ".wh."
OPAQUE = ".wh..wh..opq"
OPAQUE_XATTR = "trusted.overlay.opaque"
# what a layer's pax headers may set on a file: capabilities (ping's cap_net_raw), user attributes
KEPT_XATTRS = ("security.capability",)
LAYER_MEDIA_TYPES = {
    "application/vnd.oci.image.layer.v1.tar": "none",
    "application/vnd.oci.image.layer.v1.tar+gzip": "gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd": "zstd",
    "application/vnd.docker.image.rootfs.diff.tar.gzip": "gzip",
    "application/vnd.docker.image.rootfs.diff.tar": "none",
}
# an image layer may expand this much (a torch layer: ~3.5x); beyond it, a bomb
IMAGE_EXPANSION = ExpansionLimit(ratio=100, floor=4 << 30)


class LayerError(RuntimeError):
    """The layer cannot be unpacked; the message names the layer (and the entry)."""


@dataclass(frozen=True)
class Unpacked:
    path: Path
    files: int
    size: int  # uncompressed bytes of the tar


def compression_of(media_type: str, digest: str) -> str:
    try:
        return LAYER_MEDIA_TYPES[media_type]
    except KeyError:
        raise LayerError(
            f"layer {digest} has media type {media_type!r}, which is not an image layer (OCI or Docker tar, "
            "plain, gzip or zstd); foreign and non-distributable layers cannot be pulled"
        ) from None


class _Hashing:
    """The uncompressed stream: hashed for the diff_id, and bounded (a decompression bomb stops)."""

    def __init__(self, inner: Any, limit: int, digest: str) -> None:
        self.inner = inner
        self.sha = hashlib.sha256()
        self.size = 0
        self.limit = limit
        self.digest = digest

    def read(self, n: int = -1) -> bytes:
        data = self.inner.read(n)
        self.sha.update(data)
        self.size += len(data)
        if self.size > self.limit:
            raise DecompressionBombError(f"layer {self.digest} expands beyond {self.limit} bytes")
        return bytes(data)

    def drain(self) -> None:
        while self.read(1 << 20):
            pass


def _normalize(name: str, digest: str) -> str:
    """The entry's path relative to the root, or a LayerError for one that could leave it."""
    stripped = name.lstrip("/")
    while stripped.startswith("./"):
        stripped = stripped[2:]
    if "\x00" in stripped:
        raise LayerError(f"layer {digest}: entry {name!r} has a NUL byte in its name")
    if ".." in stripped.split("/"):
        raise LayerError(f"layer {digest}: refusing entry {name!r}, which leaves the root file system")
    return posixpath.normpath(stripped) if stripped else "."


class _Extractor:
    def __init__(self, root: Path, digest: str) -> None:
        self.root = root
        self.real_root = os.path.realpath(root)
        self.digest = digest
        self.files = 0
        self.skipped_devices = 0
        self.dirs: list[tuple[str, tarfile.TarInfo]] = []
        # Directories of the layer with no symlink on their way from the root: their entries need
        # no realpath (an lstat per component: ~14 per entry, 300,000 for torch's layer). Only
        # ``_clear`` can put a symlink where such a directory was (by removing it first), and it
        # empties this set when it removes a directory.
        self.plain_dirs: set[str] = set()

    def _inside(self, rel: str, entry: str) -> str:
        """The host path of ``rel``; its parent may not lead out through a symlink on disk."""
        target = os.path.join(self.real_root, rel)
        literal = os.path.dirname(target)
        if literal in self.plain_dirs:
            return target
        parent = os.path.realpath(literal)
        if parent != self.real_root and not parent.startswith(self.real_root + os.sep):
            raise LayerError(f"layer {self.digest}: refusing entry {entry!r}: a symlink in it leads out of the layer")
        if parent == literal and os.path.isdir(parent):
            self.plain_dirs.add(parent)
        return target

    def _parents(self, target: str) -> None:
        parent = os.path.dirname(target)
        if not os.path.isdir(parent):
            os.makedirs(parent, mode=0o755, exist_ok=True)

    def _clear(self, target: str, is_dir: bool) -> None:
        """A later entry of the same name replaces an earlier one (a directory only by a non-directory)."""
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            if not is_dir:
                shutil.rmtree(target)
                self.plain_dirs.clear()  # a symlink may come where it was
        else:
            os.unlink(target)

    def entry(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        rel = _normalize(member.name, self.digest)
        if rel == ".":
            if member.isdir():
                self.dirs.append((self.real_root, member))
            return
        base = posixpath.basename(rel)
        if base.startswith(WHITEOUT_PREFIX):
            self._whiteout(rel, base, member.name)
            return
        target = self._inside(rel, member.name)
        self._parents(target)
        self._clear(target, member.isdir())
        if member.isdir():
            os.makedirs(target, mode=0o700, exist_ok=True)
            self.dirs.append((target, member))  # its mode and times once its entries are written
            return
        if member.isreg():
            source = tar.extractfile(member)
            assert source is not None
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
        elif member.issym():
            os.symlink(member.linkname, target)
        elif member.islnk():
            link_rel = _normalize(member.linkname, self.digest)
            source_path = self._inside(link_rel, member.linkname)
            if link_rel == "." or not os.path.lexists(source_path):
                raise LayerError(
                    f"layer {self.digest}: hard link {member.name!r} points at {member.linkname!r}, "
                    "which is not an earlier entry of the layer"
                )
            os.link(source_path, target, follow_symlinks=False)
            self.files += 1
            return  # it shares the metadata of what it links to
        elif member.isfifo():
            os.mkfifo(target, 0o600)
        elif member.ischr() or member.isblk():
            # not made: a container's /dev is the runtime's, and a node elsewhere would reach the host's devices
            self.skipped_devices += 1
            return
        else:
            raise LayerError(f"layer {self.digest}: refusing entry {member.name!r} of an unknown type")
        self._attributes(target, member, symlink=member.issym())
        self.files += 1

    def _whiteout(self, rel: str, base: str, entry: str) -> None:
        parent_rel = posixpath.dirname(rel) or "."
        parent = self._inside(posixpath.join(parent_rel, "x"), entry)
        parent = os.path.dirname(parent)
        os.makedirs(parent, mode=0o755, exist_ok=True)
        if base == OPAQUE:
            os.setxattr(parent, OPAQUE_XATTR, b"y", follow_symlinks=False)
            return
        name = base[len(WHITEOUT_PREFIX) :]
        if not name or name in (".", ".."):
            raise LayerError(f"layer {self.digest}: refusing whiteout {entry!r}")
        target = os.path.join(parent, name)
        self._clear(target, False)
        os.mknod(target, 0o600 | stat.S_IFCHR, os.makedev(0, 0))

    def _attributes(self, target: str, member: tarfile.TarInfo, symlink: bool = False) -> None:
        with contextlib.suppress(OSError):  # (an unprivileged unpack keeps its own uid)
            os.chown(target, member.uid, member.gid, follow_symlinks=False)
        for key, value in (member.pax_headers or {}).items():
            name = key.removeprefix("SCHILY.xattr.")
            if name != key and name in KEPT_XATTRS and not symlink:
                with contextlib.suppress(OSError):
                    os.setxattr(target, name, value.encode("utf-8", "surrogateescape"), follow_symlinks=False)
        if not symlink:
            os.chmod(target, stat.S_IMODE(member.mode))  # after chown, which clears setuid bits
        with contextlib.suppress(OSError):
            os.utime(target, (member.mtime, member.mtime), follow_symlinks=False)

    def finish(self) -> None:
        for target, member in reversed(self.dirs):  # deepest first: a read-only parent comes last
            self._attributes(target, member)


def unpack(blob: Path, media_type: str, digest: str, diff_id: str, target: Path) -> Unpacked:
    """Unpack layer ``blob`` (verified against ``digest`` by its download) into ``target``, which
    must not exist yet; checks ``diff_id`` (the digest of the uncompressed tar). Nothing is left
    behind on failure."""
    compression = compression_of(media_type, digest)
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    size = blob.stat().st_size
    limit = IMAGE_EXPANSION.bytes_for(size) if compression != "none" else size + (1 << 20)
    decompressor: subprocess.Popen[bytes] | None = None
    try:
        with open(blob, "rb") as raw:
            gzip_tool = shutil.which("gzip") if compression == "gzip" else None
            if gzip_tool:
                # decompressed by gzip in a process of its own, beside this one's extraction (as
                # tar -x does): on two cores, a third of a large layer's time
                decompressor = subprocess.Popen(
                    [gzip_tool, "-dc"], stdin=raw, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
                )
                # a 1 MiB pipe, not 64 KiB: gzip runs ahead instead of waiting for each read
                with contextlib.suppress(OSError, AttributeError):
                    fcntl.fcntl(decompressor.stdout.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)  # type: ignore[union-attr]
                source: Any = decompressor.stdout
            else:
                source = open_decompressed(raw, compression, size, f"layer {digest}", IMAGE_EXPANSION)
            stream = _Hashing(source, limit, digest)
            extractor = _Extractor(partial, digest)
            try:
                with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
                    for member in tar:
                        extractor.entry(tar, member)
                stream.drain()  # tar's end blocks and padding count towards the diff_id
                if decompressor is not None and decompressor.wait() != 0:
                    raise EOFError(f"gzip -dc exited with {decompressor.returncode}")
            except (tarfile.TarError, EOFError, OSError, DecompressionBombError, ValueError) as exc:
                if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise LayerError(
                        f"layer {digest}: no space left on the device while unpacking it into {target.parent}; "
                        "nothing of it was kept — free some space and the pod tries again"
                    ) from None
                if isinstance(exc, OSError) and not isinstance(exc, (EOFError,)) and exc.errno is not None:
                    raise LayerError(f"layer {digest}: cannot unpack: {exc.strerror}: {exc.filename}") from None
                raise LayerError(f"layer {digest} is corrupt or truncated ({exc}); nothing of it was kept") from None
            extractor.finish()
        got = "sha256:" + stream.sha.hexdigest()
        if diff_id and got != diff_id:
            raise LayerError(
                f"layer {digest}: its uncompressed content has digest {got}, not the image config's diff_id "
                f"{diff_id}; nothing of it was kept"
            )
        os.rename(partial, target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        if decompressor is not None:
            if decompressor.poll() is None:
                decompressor.kill()
            decompressor.wait()
            if decompressor.stdout is not None:
                decompressor.stdout.close()
    return Unpacked(target, extractor.files, stream.size)


def read_text(layer: Path, path: str) -> str | None:
    """A small file of an unpacked layer (``etc/passwd``), not following a symlink out of it."""
    try:
        fd = os.open(layer / path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        data: IO[bytes] = handle
        return data.read(1 << 20).decode("utf-8", "replace")
