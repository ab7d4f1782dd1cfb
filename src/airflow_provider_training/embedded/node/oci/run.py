"""What a pod's supervisor starts for a container of an image: ``entry.py oci-run BUNDLE``.

1. A fresh writable layer (a restarted container is a new container: nothing of the last run's
   writes survives, as on a kubelet), and no state left by a runc that was killed.
2. A mount namespace and a PID namespace of its own: the root file system is mounted there
   (overlayfs of the image's unpacked layers under the writable layer; where the kernel refuses
   overlay, the layers copied into the writable layer), so it goes away with the container and
   no mount is ever left on the host.
3. ``runc run`` as PID 1 of that PID namespace, with a ``/proc`` of its own. When it ends — or is
   killed, as the supervisor kills a container after its grace period — the kernel kills every
   process of the namespace, the container's too: nothing outlives the container.

Signals are passed on to runc (which passes them to the container's process); the exit code is
runc's, which is the container's (a signal S as 128+S). ``runc.pid`` in the bundle names runc's
process while it runs: ``kubectl exec`` enters its namespaces to run ``runc exec`` (``podexec``).
Standard library only: it starts once per container start.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

_CLONE_NEWNS = 0x00020000
_CLONE_NEWPID = 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
ROOTFS_ENV = "AIRFLOW_TRAINING_OCI_ROOTFS"  # "copy": never overlay (tests the fallback)
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
OPAQUE_XATTR = "trusted.overlay.opaque"


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _mount(
    libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    if libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype or 'bind'} on {target}: {os.strerror(err)}")


def fresh(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, mode=0o755, exist_ok=True)


def mount_rootfs(libc: ctypes.CDLL, run: dict[str, Any]) -> str:
    """Mount the container's root file system at ``run["rootfs"]``; returns "overlay" or "copy"."""
    lower = [str(p) for p in reversed(run["layers"])]  # overlay lists the top-most first
    if os.environ.get(ROOTFS_ENV) != "copy" and lower:
        # relative names keep the option under the page-size limit of mount data with many layers
        common = os.path.dirname(lower[0])
        relative = all(os.path.dirname(p) == common for p in lower)
        names = [os.path.basename(p) if relative else p for p in lower]
        data = f"lowerdir={':'.join(names)},upperdir={run['upper']},workdir={run['work']}"
        try:
            here = os.getcwd()
            os.chdir(common if relative else "/")
            try:
                _mount(libc, "overlay", run["rootfs"], "overlay", 0, data)
            finally:
                os.chdir(here)
            return "overlay"
        except OSError as exc:
            print(
                f"overlayfs unavailable ({exc.strerror}); copying the image's layers instead",
                file=sys.stderr,
                flush=True,
            )
            fresh(run["upper"])
    for layer in run["layers"]:
        apply_layer(Path(layer), Path(run["upper"]))
    _mount(libc, run["upper"], run["rootfs"], None, _MS_BIND | _MS_REC)
    return "copy"


def apply_layer(layer: Path, merged: Path) -> None:
    """Copy one unpacked layer over ``merged``, applying its whiteouts (what overlay does)."""
    whiteouts = []
    for dirpath, dirnames, filenames in os.walk(layer):
        rel = os.path.relpath(dirpath, layer)
        with contextlib.suppress(OSError):
            if os.getxattr(dirpath, OPAQUE_XATTR, follow_symlinks=False) == b"y":
                target = merged / rel
                if target.is_dir() and not target.is_symlink():
                    for child in target.iterdir():
                        _remove(child)
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                whiteouts.append(os.path.normpath(os.path.join(rel, name)))
    for rel in whiteouts:
        _remove(merged / rel)
    subprocess.run(["cp", "-a", "--", f"{layer}/.", f"{merged}/"], check=True)
    for rel in whiteouts:
        with contextlib.suppress(OSError):
            os.unlink(merged / rel)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: entry.py oci-run BUNDLE", file=sys.stderr)
        return 2
    bundle = Path(argv[0])
    run = json.loads((bundle / "run.json").read_text())
    fresh(run["upper"])
    fresh(run["work"])
    shutil.rmtree(Path(run["root"]) / run["id"], ignore_errors=True)  # a runc killed before it could clean up
    libc = _libc()
    if libc.unshare(_CLONE_NEWNS | _CLONE_NEWPID) != 0:
        err = ctypes.get_errno()
        print(f"cannot create the container's namespaces: {os.strerror(err)} (image mode needs root)", file=sys.stderr)
        return 128
    try:
        _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE)
        mount_rootfs(libc, run)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"cannot mount the container's root file system: {exc}", file=sys.stderr)
        return 128
    pid = os.fork()
    if pid == 0:  # PID 1 of the new namespace
        try:
            _mount(libc, "proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
            os.execv(run["runc"], [run["runc"], "--root", run["root"], "run", "--bundle", str(bundle), run["id"]])
        except OSError as exc:
            print(f"cannot run {run['runc']}: {exc}", file=sys.stderr, flush=True)
        os._exit(128)
    for sig in FORWARDED:
        signal.signal(sig, lambda s, _f: _forward(pid, s))
    with contextlib.suppress(OSError):
        Path(run["pidFile"]).write_text(str(pid))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            status = 0
            break
    with contextlib.suppress(OSError):
        os.unlink(run["pidFile"])
    shutil.rmtree(Path(run["root"]) / run["id"], ignore_errors=True)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def exec_argv(bundle: str, command: list[str]) -> list[str] | None:
    """``kubectl exec`` into a running container of an image: ``runc exec`` in the namespaces of the
    container's runc (its PID view and /proc), so it sees the container as runc started it. The
    process gets the container's user, environment, working directory and capabilities from its
    config. None when the container does not run or nsenter is missing."""
    nsenter = shutil.which("nsenter")
    try:
        run = json.loads((Path(bundle) / "run.json").read_text())
        pid = int(Path(run["pidFile"]).read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if nsenter is None:
        return None
    return [nsenter, "-t", str(pid), "-m", "-p", "--", run["runc"], "--root", run["root"], "exec", run["id"], *command]


def _forward(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)
