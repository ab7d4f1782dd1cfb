"""How a container's mount paths (``/output``, ``/data``, ``/etc/mpi``) reach host directories.

Two mechanisms, chosen once per node agent (``mode()``):

``namespace`` (Linux, root or unprivileged user namespaces)
    The container process gets a private mount namespace whose root is a tmpfs holding a bind
    mount of every top-level entry of the host's ``/``, plus a bind mount of each volume at its
    mount path; then it ``pivot_root``s into that root. The host sees none of it (no directory is
    created on the host), concurrent pods may mount different directories at the same path, and
    a mount path inside an existing directory (``/etc/mpi``) works: that directory is rebuilt as a
    tmpfs of bind mounts of its entries, with the new mount point added.

    A view is also a sandbox (``Sandbox``): the node's data directory and runtime directories are
    covered by an empty read-only tmpfs (what a pod needs from them, its volumes, is bound in at
    its mount paths; the node's ``kit`` / ``kubectl`` shims are shown again read-only), the host's
    old root sits under another one after ``pivot_root`` (no ``..`` leads out of the view), and
    ``/proc/sys``, ``/proc/sysrq-trigger`` and ``/sys`` (less its cgroups) are read-only, and the
    host's block devices are covered, so a root container cannot write a kernel setting or read
    the disk under the masks. That holds against a container without ``SYS_ADMIN`` and
    ``SYS_PTRACE`` (``privileges``), which cannot unmount a mask or reach through another
    process's ``/proc/PID/root``.

``links`` (portable fallback: macOS, or a kernel that refuses namespaces)
    A mount path that does not exist on the host is created as a symlink to the volume's
    directory. What it cannot do: a path that already exists (a real directory) or whose parent
    is not writable stays unreachable (the pod gets a Warning event), and two pods mounting
    different directories at the same path collide (the second gets a Warning event). The
    symlinks stay on the host after the pod ends.

This module uses only the standard library: the supervisor imports it without the package.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import platform
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from airflow_provider_training.embedded.node import safepaths as safe

NAMESPACE = "namespace"
LINKS = "links"
# Where the host's root is left by pivot_root inside a view, under an empty read-only tmpfs.
OLD_ROOT = ".host"

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MS_UNBINDABLE = 1 << 17
_MOUNT_ATTR_RDONLY = 1
_AT_RECURSIVE = 0x8000
_SYS_MOUNT_SETATTR = 442  # the same number on every architecture (added after the tables were unified)
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
# /proc entries a root process could change the kernel through without a capability (Docker makes
# these and a few more read-only; each is a mount per view, and views are made per pod)
_PROC_READ_ONLY = ("sys", "sysrq-trigger")
# the cgroups the supervisor makes for memory limits (``memory``), left writable under a read-only /sys
_CGROUPS_WRITTEN = ("/sys/fs/cgroup/memory",)


@dataclass(frozen=True)
class Mount:
    source: str  # host path (directory or file); with ``sub_path``, the volume's root
    target: str  # absolute container path
    read_only: bool = False
    # relative to ``source``: opened at each start without following a link out of the volume
    # (``paths.open_beneath``), and mounted through that descriptor
    sub_path: str = ""
    volume: str = ""  # the volume's name, for messages

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"source": self.source, "target": self.target, "readOnly": self.read_only}
        if self.sub_path:
            out.update(subPath=self.sub_path, volume=self.volume)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Mount:
        return cls(
            str(data["source"]),
            str(data["target"]),
            bool(data.get("readOnly")),
            str(data.get("subPath") or ""),
            str(data.get("volume") or ""),
        )


@dataclass(frozen=True)
class Sandbox:
    """What every view hides: ``hide`` (host directories covered by an empty read-only tmpfs: the
    data directory, the runtime directories) and ``expose`` (paths inside them shown again,
    read-only, at the same place: the node's ``kit`` / ``kubectl`` shims)."""

    hide: tuple[str, ...] = ()
    expose: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"hide": list(self.hide), "expose": list(self.expose)}

    @classmethod
    def from_dict(cls, data: object) -> Sandbox:
        if not isinstance(data, dict):
            return cls()
        return cls(tuple(str(p) for p in data.get("hide") or ()), tuple(str(p) for p in data.get("expose") or ()))

    def argv(self) -> list[str]:
        """As options of ``entry.py zygote``."""
        return [*(a for p in self.hide for a in ("--hide", p)), *(a for p in self.expose for a in ("--expose", p))]


class IsolationError(OSError):
    pass


@functools.cache
def _libc() -> ctypes.CDLL:
    # glibc by its soname first: find_library() runs `ldconfig -p` in a child (~200 ms per call)
    with contextlib.suppress(OSError):
        return ctypes.CDLL("libc.so.6", use_errno=True)
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise IsolationError(errno, f"{what}: {os.strerror(errno)}")


def _enc(text: str | None) -> bytes | None:
    return text.encode() if text is not None else None


class _Mounter:
    def __init__(self) -> None:
        self.libc = _libc()
        self.skeletons: set[str] = set()
        self.masks: list[str] = []

    def mount(self, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
        _check(
            self.libc.mount(_enc(source), _enc(target), _enc(fstype), flags, _enc(data)), f"mount {source} on {target}"
        )

    def unshare(self) -> None:
        uid, gid = os.getuid(), os.getgid()
        if uid == 0:
            _check(self.libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
            return
        _check(self.libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare(CLONE_NEWUSER|CLONE_NEWNS)")
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")

    def populate(self, new_dir: str, real_dir: str, unbindable: bool = False) -> None:
        """Make ``new_dir`` (a fresh tmpfs) show every entry of ``real_dir`` through bind mounts;
        ``unbindable``: the new tmpfs is left out of recursive binds made afterwards."""
        self.mount("tmpfs", new_dir, "tmpfs", 0, "mode=755")
        if unbindable:
            self.mount(None, new_dir, None, _MS_UNBINDABLE)
        self.skeletons.add(new_dir)
        for entry in os.scandir(real_dir):
            target = os.path.join(new_dir, entry.name)
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), target)
            elif entry.is_dir(follow_symlinks=False):
                os.mkdir(target)
                self.mount(entry.path, target, None, _MS_BIND | _MS_REC)
            else:
                open(target, "w").close()
                with contextlib.suppress(IsolationError):  # sockets and the like
                    self.mount(entry.path, target, None, _MS_BIND)

    def materialize(self, root: str, path: str, is_dir: bool) -> str:
        """Create ``path`` inside the new root (not on the host) and return its location there."""
        parts = [p for p in path.split("/") if p]
        current, real = root, "/"
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            nxt = os.path.join(current, part)
            if os.path.lexists(nxt):
                current, real = nxt, os.path.join(real, part)
                continue
            if current not in self.skeletons:
                self.populate(current, real)
            if last and not is_dir:
                open(nxt, "w").close()
            else:
                os.mkdir(nxt)
            self.skeletons.add(nxt) if not last else None
            current, real = nxt, os.path.join(real, part)
        return current

    # -- the sandbox ------------------------------------------------------------------------
    def read_only(self, target: str, recursive: bool = False) -> None:
        """``target`` (a mount point) read-only; with ``recursive`` the mounts below it too."""
        if recursive:
            attr = (ctypes.c_uint64 * 4)(_MOUNT_ATTR_RDONLY, 0, 0, 0)  # struct mount_attr
            done = self.libc.syscall(_SYS_MOUNT_SETATTR, -100, _enc(target), _AT_RECURSIVE, attr, 32) == 0
            if done:
                return
        self.mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY)

    def harden(self, root: str) -> None:
        """What a root process could reach the host through, made read-only or covered in the view.
        As root a failure fails the view; in a user namespace (no real root inside) it is skipped."""
        strict = os.geteuid() == 0
        for name in _PROC_READ_ONLY:
            target = os.path.join(root, "proc", name)
            if os.path.lexists(target):
                with _unless(strict):
                    self.mount(target, target, None, _MS_BIND | _MS_REC)
                    self.read_only(target, recursive=True)
        sys_dir = os.path.join(root, "sys")
        if os.path.isdir(sys_dir) and os.path.ismount(sys_dir):
            with _unless(strict):
                self.read_only(sys_dir, recursive=True)
                for cgroup in _CGROUPS_WRITTEN:
                    if os.path.ismount(cgroup):
                        self.mount(cgroup, os.path.join(root, cgroup.lstrip("/")), None, _MS_BIND)
        # a block device node, read as root, is the disk under every mask
        for path in _block_devices():
            with _unless(strict):
                self.mount("/dev/null", os.path.join(root, path.lstrip("/")), None, _MS_BIND)

    def mask(self, root: str, path: str) -> None:
        """Cover ``path`` (a host directory) in the view with an empty tmpfs, made read-only by ``seal``."""
        target = os.path.join(root, os.path.realpath(path).lstrip("/"))
        if not os.path.isdir(target) or target in self.masks:
            return
        self.mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755,size=1m")
        self.skeletons.add(target)
        self.masks.append(target)

    def seal(self) -> None:
        for target in self.masks:
            self.read_only(target)

    def pivot(self, root: str) -> None:
        """``root`` becomes this mount namespace's root (no ``..`` leads out of it, unlike a chroot);
        the old root stays mounted under an empty read-only tmpfs (unmounting it would wait for an
        RCU grace period on every start). Without a known ``pivot_root`` number: a chroot."""
        number = _SYS_PIVOT_ROOT.get(platform.machine())
        put_old = os.path.join(root, OLD_ROOT)
        if number is None or not os.path.isdir(put_old):
            os.chroot(root)
            return
        _check(self.libc.syscall(number, _enc(root), _enc(put_old)), "pivot_root")
        os.chdir("/")
        self.mount(
            "tmpfs", "/" + OLD_ROOT, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mode=000,size=4k"
        )


def _block_devices() -> list[str]:
    """The block device nodes of ``/dev``: the kernel's block devices by name (``/sys/class/block``,
    one directory read) where devtmpfs made their nodes, else a scan of ``/dev``; each checked to
    be one (a stat of each of ~100 entries of /dev costs milliseconds while mounts are made)."""
    try:
        names = os.listdir("/sys/class/block")
        candidates = [f"/dev/{name}" for name in names] + [
            f"/dev/mapper/{name}" for name in _listdir("/dev/mapper") if name != "control"
        ]
    except OSError:
        candidates = [f"/dev/{name}" for name in _listdir("/dev")]
    out = []
    for path in candidates:
        try:
            if stat.S_ISBLK(os.lstat(path).st_mode):
                out.append(path)
        except OSError:
            continue
    return out


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


@contextlib.contextmanager
def _unless(strict: bool) -> Iterator[None]:
    """Errors raise when ``strict``, else are skipped."""
    try:
        yield
    except OSError:
        if strict:
            raise


class View:
    """A view under construction in the calling process: its mount namespace and root exist, the
    pod's own mounts are not in it yet. :func:`prepare` does the part all pods share, so a spare
    supervisor can do it before it knows its pod; :meth:`finish` adds the pod's part."""

    def __init__(self, root: str, mounter: _Mounter) -> None:
        self.root = root
        self._m = mounter

    def finish(self, mounts: list[Mount], workdir: str | None, workdirs: tuple[str, ...] = ()) -> None:
        """Bind ``mounts`` in, then make the root this process's (``pivot_root``) and
        ``chdir(workdir)`` (created in the view if missing, as is each of ``workdirs``). A mount
        with a ``sub_path`` is opened here (``paths.open_beneath``: never through a link out of its
        volume) and mounted through that descriptor, so what is mounted is what was checked; it is
        opened in this mount namespace because a descriptor from another cannot be bind-mounted."""
        m, root = self._m, self.root
        for mount in sorted(mounts, key=lambda x: x.target.count("/")):
            opened = safe.open_beneath(mount.source, mount.sub_path) if mount.sub_path else -1
            source = f"/proc/self/fd/{opened}" if opened >= 0 else mount.source
            try:
                # Through the host's symlinks (/var/run -> /run): the view holds the same links, and
                # a bind mount made under a link's absolute target would land outside the new root.
                target = m.materialize(root, os.path.realpath(mount.target), os.path.isdir(source))
                m.mount(source, target, None, _MS_BIND | _MS_REC)
            finally:
                if opened >= 0:
                    os.close(opened)
            if mount.read_only:
                with contextlib.suppress(IsolationError):
                    m.mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY)
        for directory in (workdir, *workdirs):
            if directory and not os.path.lexists(os.path.join(root, directory.lstrip("/"))):
                m.materialize(root, directory, True)
        m.seal()
        m.pivot(root)
        os.chdir(workdir or "/")


def prepare(root: str, directories: tuple[str, ...] = (), sandbox: Sandbox | None = None) -> View:
    """In the calling process: a private mount namespace with ``root`` (an empty directory on the
    host) holding a bind mount of every top-level entry of ``/``, the ``sandbox``'s directories
    covered, and each of ``directories`` made in it (not on the host) as a mount point for later."""
    root = os.path.realpath(root)
    m = _Mounter()
    m.unshare()
    m.mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    # Unbindable, so the recursive bind of the directory holding ``root`` does not copy the new root
    # into itself (unmounting that copy made the kernel wait for an RCU grace period).
    m.populate(root, "/", unbindable=True)
    os.mkdir(os.path.join(root, OLD_ROOT), 0)
    m.harden(root)
    sandbox = sandbox or Sandbox()
    for path in sandbox.hide:
        m.mask(root, path)
    for path in sandbox.expose:
        if os.path.exists(path):
            real = os.path.realpath(path)
            target = m.materialize(root, real, os.path.isdir(real))
            m.mount(real, target, None, _MS_BIND | _MS_REC)
            with contextlib.suppress(IsolationError):
                m.read_only(target, recursive=True)
    for directory in directories:
        m.materialize(root, os.path.realpath(directory), True)
    return View(root, m)


def enter(
    root: str, mounts: list[Mount], workdir: str | None, workdirs: tuple[str, ...] = (), sandbox: Sandbox | None = None
) -> None:
    """In the calling process (a container about to exec, or a pod's supervisor): private mount
    namespace, a view of ``/`` with ``mounts`` added and ``sandbox`` hidden as its root, then
    ``chdir(workdir)``."""
    prepare(root, sandbox=sandbox).finish(mounts, workdir, workdirs)


def join(pid: int, workdir: str | None) -> bool:
    """Enter the mount view of running process ``pid`` (a container's, built by ``enter``) and its
    root, as ``nsenter`` / a runtime's exec does; False (nothing changed) when that is not possible
    (the process is gone, no privilege). Much cheaper than a view of its own: nothing to tear down."""
    try:
        ns = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
        root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        if os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"):
            _check(_libc().setns(ns, _CLONE_NEWNS), "setns(CLONE_NEWNS)")
        os.fchdir(root)
        os.chroot(".")
        os.chdir(workdir or "/")
        return True
    except OSError:
        return False
    finally:
        os.close(ns)
        os.close(root)


def link(mounts: list[Mount]) -> list[str]:
    """The fallback: symlink each missing mount path to its source. Returns the problems found."""
    problems = []
    for mount in mounts:
        target = mount.target
        if os.path.islink(target):
            if os.path.realpath(target) != os.path.realpath(mount.source):
                problems.append(
                    f"{target} already links to {os.readlink(target)} (another pod's volume); "
                    f"this pod's volume is at {mount.source}"
                )
            continue
        if os.path.exists(target):
            problems.append(f"{target} exists on the host, so the volume at {mount.source} cannot be linked there")
            continue
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(mount.source, target)
        except OSError as exc:
            problems.append(f"cannot link {target} to {mount.source}: {exc.strerror}")
    return problems


def probe() -> str:
    """NAMESPACE when a child process can build a private view here, else LINKS."""
    if not sys.platform.startswith("linux"):
        return LINKS
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            m = _Mounter()
            m.unshare()
            m.mount(None, "/", None, _MS_REC | _MS_PRIVATE)
            m.mount("tmpfs", "/tmp", "tmpfs", 0, "mode=755")  # only in this child's namespace
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return NAMESPACE if os.waitstatus_to_exitcode(status) == 0 else LINKS
