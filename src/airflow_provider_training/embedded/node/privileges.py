"""Who a container's process is once it starts: its user and groups (``securityContext``) and, while
it runs as root, the capabilities a container runtime leaves it.

A container that runs as root here shares the host's kernel and file system like any root
process; what keeps it inside its mount view (``isolation``) is the set of capabilities it may
have: Docker's default set (``DEFAULT``) without ``MKNOD`` and ``SETFCAP``, which a runtime with a
device cgroup and an image of its own can afford and this node cannot. So it cannot mount or unmount
(no ``SYS_ADMIN``: the view's masks stay), cannot read another process's root, working directory,
descriptors or environment unless that process has no more capabilities than it (no
``SYS_PTRACE``: the node's own processes, which keep all of theirs, stay out of reach), cannot open
files by handle (no ``DAC_READ_SEARCH``), load modules, or make device nodes.

Applied in the child between ``fork`` and ``exec`` (``drop``), by ``podexec`` after it has joined a
container's view, or by util-linux's ``setpriv`` (``setpriv_argv``) for the API server's ``nsenter``
path. Standard library only (imported by the supervisor).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass

# linux/capability.h
CAPABILITIES = {
    "CHOWN": 0,
    "DAC_OVERRIDE": 1,
    "DAC_READ_SEARCH": 2,
    "FOWNER": 3,
    "FSETID": 4,
    "KILL": 5,
    "SETGID": 6,
    "SETUID": 7,
    "SETPCAP": 8,
    "LINUX_IMMUTABLE": 9,
    "NET_BIND_SERVICE": 10,
    "NET_BROADCAST": 11,
    "NET_ADMIN": 12,
    "NET_RAW": 13,
    "IPC_LOCK": 14,
    "IPC_OWNER": 15,
    "SYS_MODULE": 16,
    "SYS_RAWIO": 17,
    "SYS_CHROOT": 18,
    "SYS_PTRACE": 19,
    "SYS_PACCT": 20,
    "SYS_ADMIN": 21,
    "SYS_BOOT": 22,
    "SYS_NICE": 23,
    "SYS_RESOURCE": 24,
    "SYS_TIME": 25,
    "SYS_TTY_CONFIG": 26,
    "MKNOD": 27,
    "LEASE": 28,
    "AUDIT_WRITE": 29,
    "AUDIT_CONTROL": 30,
    "SETFCAP": 31,
    "MAC_OVERRIDE": 32,
    "MAC_ADMIN": 33,
    "SYSLOG": 34,
    "WAKE_ALARM": 35,
    "BLOCK_SUSPEND": 36,
    "AUDIT_READ": 37,
    "PERFMON": 38,
    "BPF": 39,
    "CHECKPOINT_RESTORE": 40,
}
# Docker's default set, less MKNOD (no device cgroup here: a block device node would read the disk)
# and SETFCAP (the files are the host's, not an image's).
DEFAULT = (
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "NET_RAW",
    "SYS_CHROOT",
    "AUDIT_WRITE",
)

_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAPABILITY_VERSION_3 = 0x20080522


@dataclass(frozen=True)
class Identity:
    """A container's process: ``uid`` / ``gid`` / supplementary ``groups`` to switch to (None: the
    node's), the capabilities it keeps while root, and ``no_new_privs`` (allowPrivilegeEscalation: false)."""

    uid: int | None = None
    gid: int | None = None
    groups: tuple[int, ...] | None = None
    capabilities: tuple[str, ...] = DEFAULT
    no_new_privs: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "uid": self.uid,
            "gid": self.gid,
            "groups": list(self.groups) if self.groups is not None else None,
            "capabilities": list(self.capabilities),
            "noNewPrivs": self.no_new_privs,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object] | None) -> Identity:
        if not data:
            return cls()
        groups = data.get("groups")
        caps = data.get("capabilities")
        return cls(
            uid=_int_or_none(data.get("uid")),
            gid=_int_or_none(data.get("gid")),
            groups=tuple(int(g) for g in groups) if isinstance(groups, list) else None,
            capabilities=tuple(str(c) for c in caps) if isinstance(caps, list) else DEFAULT,
            no_new_privs=bool(data.get("noNewPrivs")),
        )

    @property
    def switches_user(self) -> bool:
        return self.uid is not None or self.gid is not None or self.groups is not None


def _int_or_none(value: object) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL("libc.so.6", use_errno=True)


@functools.cache
def last_capability() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return max(CAPABILITIES.values())


def bound(keep: Iterable[str]) -> None:
    """Drop every capability but ``keep`` from this process's bounding set (and clear its ambient and
    inheritable sets): what it executes from now on, and its children, never get the others. The
    process itself keeps what it has, so it can still build views for its children."""
    if os.geteuid() != 0:
        return
    libc = _libc()
    kept = {CAPABILITIES[name] for name in keep if name in CAPABILITIES}
    for number in range(last_capability() + 1):
        if number not in kept and libc.prctl(_PR_CAPBSET_DROP, number, 0, 0, 0) != 0:
            errno = ctypes.get_errno()
            if errno != 22:  # EINVAL: a capability this kernel does not know
                raise OSError(errno, f"cannot drop capability {number}: {os.strerror(errno)}")
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    _clear_inheritable()


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _clear_inheritable() -> None:
    """A root process's inheritable set reaches what it executes whatever the bounding set says."""
    libc = _libc()
    header = _Header(_CAPABILITY_VERSION_3, 0)
    data = (_Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        return
    if not (data[0].inheritable or data[1].inheritable):
        return
    data[0].inheritable = data[1].inheritable = 0
    libc.capset(ctypes.byref(header), data)


def drop(identity: Identity) -> None:
    """In the process about to become the container (or an exec'd command): the capabilities it keeps
    as root, no_new_privs, then its groups, group and user (the user last: it ends the privileges)."""
    bound(identity.capabilities)
    if identity.no_new_privs and _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"cannot set no_new_privs: {os.strerror(errno)}")
    if identity.groups is not None:
        os.setgroups(list(identity.groups))
    if identity.gid is not None:
        os.setresgid(identity.gid, identity.gid, identity.gid)
    if identity.uid is not None:
        os.setresuid(identity.uid, identity.uid, identity.uid)


def setpriv_argv(identity: Identity) -> list[str] | None:
    """util-linux ``setpriv`` arguments that do what ``drop`` does, ending with ``--``; None when
    there is no ``setpriv`` here (the caller then goes through ``podexec``, which calls ``drop``)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    argv = [setpriv]
    if identity.uid is not None:
        argv += ["--reuid", str(identity.uid)]
    if identity.gid is not None:
        argv += ["--regid", str(identity.gid)]
    if identity.groups is not None:
        argv += ["--groups", ",".join(str(g) for g in identity.groups)] if identity.groups else ["--clear-groups"]
    names = ",".join(f"+{name.lower()}" for name in identity.capabilities if name in CAPABILITIES)
    argv += ["--bounding-set", f"-all{',' + names if names else ''}", "--inh-caps", "-all"]
    if identity.no_new_privs:
        argv.append("--no-new-privs")
    return [*argv, "--"]


def can_switch_user() -> bool:
    """Whether this node may start processes as other users (it runs as root)."""
    with contextlib.suppress(AttributeError):
        return os.geteuid() == 0
    return False
