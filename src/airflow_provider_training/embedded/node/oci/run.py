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
The supervisor runs this in a fork of itself (``spawn``), not as ``entry.py oci-run BUNDLE`` in a
fresh interpreter: the interpreter's start was the largest part of a warm pod's start in image mode
(~50 ms of CPU, against ~100 ms for ``runc run`` itself). ``entry.py oci-run`` runs the same ``main``.
Standard library only, and as little of it as will do (no ``pathlib``, ``subprocess`` or
``ctypes.util``, which runs ``ldconfig``): the zygote imports it with the supervisor.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import stat
import sys

TYPE_CHECKING = False  # (typing itself is not imported at run time: see above)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import IO, Any

_CLONE_NEWNS = 0x00020000
_CLONE_NEWPID = 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
ROOTFS_ENV = "AIRFLOW_TRAINING_OCI_ROOTFS"  # "copy": never overlay (tests the fallback)
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
OPAQUE_XATTR = "trusted.overlay.opaque"


def _libc() -> ctypes.CDLL:
    """The C library: the interpreter's own symbols, which include it (``find_library`` would run
    ``ldconfig`` to find its name), else looked up."""
    libc = ctypes.CDLL(None, use_errno=True)
    if hasattr(libc, "unshare") and hasattr(libc, "mount"):
        return libc
    from ctypes.util import find_library

    return ctypes.CDLL(find_library("c") or "libc.so.6", use_errno=True)


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
        apply_layer(layer, run["upper"])
    _mount(libc, run["upper"], run["rootfs"], None, _MS_BIND | _MS_REC)
    return "copy"


def apply_layer(layer: str | Path, merged: str | Path) -> None:
    """Copy one unpacked layer over ``merged``, applying its whiteouts (what overlay does); OSError
    when the copy fails."""
    import subprocess

    whiteouts = []
    for dirpath, dirnames, filenames in os.walk(layer):
        rel = os.path.relpath(dirpath, layer)
        with contextlib.suppress(OSError):
            if os.getxattr(dirpath, OPAQUE_XATTR, follow_symlinks=False) == b"y":
                target = os.path.join(merged, rel)
                if os.path.isdir(target) and not os.path.islink(target):
                    for child in os.listdir(target):
                        _remove(os.path.join(target, child))
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                whiteouts.append(os.path.normpath(os.path.join(rel, name)))
    for rel in whiteouts:
        _remove(os.path.join(merged, rel))
    copied = subprocess.run(["cp", "-a", "--", f"{layer}/.", f"{merged}/"], stderr=subprocess.PIPE, text=True)
    if copied.returncode != 0:
        raise OSError(f"cp -a of the layer {layer} exited with {copied.returncode}: {copied.stderr.strip()}")
    for rel in whiteouts:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(merged, rel))


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: entry.py oci-run BUNDLE", file=sys.stderr)
        return 2
    bundle = argv[0]
    with open(os.path.join(bundle, "run.json"), encoding="utf-8") as handle:
        run = json.load(handle)
    fresh(run["upper"])
    fresh(run["work"])
    shutil.rmtree(os.path.join(run["root"], run["id"]), ignore_errors=True)  # a runc killed before it could clean up
    libc = _libc()
    if libc.unshare(_CLONE_NEWNS | _CLONE_NEWPID) != 0:
        err = ctypes.get_errno()
        print(f"cannot create the container's namespaces: {os.strerror(err)} (image mode needs root)", file=sys.stderr)
        return 128
    try:
        _mount(libc, None, "/", None, _MS_REC | _MS_PRIVATE)
        mount_rootfs(libc, run)
    except OSError as exc:
        print(f"cannot mount the container's root file system: {exc}", file=sys.stderr)
        return 128
    pid = os.fork()
    if pid == 0:  # PID 1 of the new namespace
        try:
            _mount(libc, "proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
            os.execv(run["runc"], [run["runc"], "--root", run["root"], "run", "--bundle", bundle, run["id"]])
        except OSError as exc:
            print(f"cannot run {run['runc']}: {exc}", file=sys.stderr, flush=True)
        os._exit(128)
    for sig in FORWARDED:
        signal.signal(sig, lambda s, _f: _forward(pid, s))
    with contextlib.suppress(OSError), open(run["pidFile"], "w", encoding="utf-8") as pid_file:
        pid_file.write(str(pid))
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
    shutil.rmtree(os.path.join(run["root"], run["id"]), ignore_errors=True)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class Forked:
    """The runner forked by ``spawn``: what the supervisor reads of a ``subprocess.Popen``."""

    def __init__(self, pid: int, stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None


def spawn(bundle: str, env: dict[str, str]) -> Forked:
    """``main([bundle])`` in a fork of this process, set up as the supervisor's ``Popen`` sets up a
    container (a session of its own, stdin from /dev/null, stdout and stderr into one pipe, no other
    descriptor, ``env`` as the environment) but without a fresh interpreter to start. The caller
    reaps it (``waitpid``) and reads its output from ``stdout``. Only for a process without threads
    (the supervisor has none): a fork copies the calling thread alone."""
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    read, write = os.pipe()
    for stream in (sys.stdout, sys.stderr):  # what this process buffered is its own, not the container's
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        pid = os.fork()
    except OSError:
        for fd in (devnull, read, write):
            os.close(fd)
        raise
    if pid == 0:
        code = 128
        try:
            # the supervisor's signal handling is not the runner's (which installs its own in main);
            # SIGPIPE stays ignored, as in the interpreter ``entry.py oci-run`` started
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, *FORWARDED):
                signal.signal(sig, signal.SIG_DFL)
            os.setsid()
            os.dup2(devnull, 0)
            os.dup2(write, 1)
            os.dup2(write, 2)
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # close_range(2): the supervisor's lock, socket, pipes
            os.environ.clear()
            os.environ.update(env)
            code = main([bundle])
        except BaseException as exc:  # whatever it is ends in the container's log, not the supervisor's
            with contextlib.suppress(BaseException):
                print(f"cannot run the container: {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(BaseException):
                    stream.flush()
            os._exit(code)
    os.close(write)
    os.close(devnull)
    return Forked(pid, os.fdopen(read, "rb"))


def exec_argv(bundle: str, command: list[str]) -> list[str] | None:
    """``kubectl exec`` into a running container of an image: ``runc exec`` in the namespaces of the
    container's runc (its PID view and /proc), so it sees the container as runc started it. The
    process gets the container's user, environment, working directory and capabilities from its
    config. None when the container does not run or nsenter is missing."""
    nsenter = shutil.which("nsenter")
    try:
        with open(os.path.join(bundle, "run.json"), encoding="utf-8") as handle:
            run = json.load(handle)
        with open(run["pidFile"], encoding="utf-8") as pid_file:
            pid = int(pid_file.read())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if nsenter is None:
        return None
    return [nsenter, "-t", str(pid), "-m", "-p", "--", run["runc"], "--root", run["root"], "exec", run["id"], *command]


def _forward(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)
