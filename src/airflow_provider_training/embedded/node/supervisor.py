"""The per-pod supervisor: runs a pod's containers as local processes and records what the kubelet
would (``state.json``), surviving a crash of the daemon that started it.

One supervisor process per pod, in its own session, started by the node agent with the pod's
``spec.json`` (argv, environment, working directory, mounts, limits, restart policy already
resolved). It runs the init containers in order, then the containers together; restarts them in
place for ``Always`` / ``OnFailure`` with the kubelet's back-off (10 s doubling to 5 min unless the
spec says otherwise); writes each start's output to ``logs/<ns>/<pod>/<container>/<restart>.log``;
reports a death by signal S as exit code 128+S, and a memory-limit kill as ``OOMKilled`` (137).
After every change it rewrites ``state.json`` atomically and pings the agent's socket. It holds
``supervisor.lock`` for its whole life, so the agent can tell a live supervisor from a dead one
after its own restart. SIGTERM (the pod was deleted) stops the containers (SIGTERM, then SIGKILL
after the grace period) and ends the supervisor. So does the deletion of the data directory
(``rm -rf`` of a home, a test's temporary one): no daemon can adopt the pod any more, and a
supervisor left to restart its containers for ever is what once piled up by the thousand.

Standard library only, and no import of the package's ``__init__`` (see ``entry.py``): it starts
once per pod, so its start-up time is part of every job's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import selectors
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded import podlogs
from airflow_provider_training.embedded.node import isolation, memory, orphans, podexec, privileges
from airflow_provider_training.embedded.node import safepaths as safe
from airflow_provider_training.embedded.node.oci import run as oci_run

SPEC = "spec.json"
STATE = "state.json"
LOCK = "supervisor.lock"

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
# How often a supervisor looks whether its data directory still exists (one fstat).
HOME_CHECK_INTERVAL = 5.0


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def exit_code_of(status: int) -> int:
    """``waitpid`` status to the exit code a container runtime reports (signal S -> 128+S)."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


@dataclass
class Container:
    spec: dict[str, Any]
    init: bool
    restart_count: int = 0
    crashes: int = 0  # consecutive failed runs, for the back-off
    state: dict[str, Any] = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: dict[str, Any] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | oci_run.Forked | None = None
    started_mono: float = 0.0
    restart_at: float | None = None
    done: bool = False  # terminated and not to be restarted
    started_once: bool = False
    oom: bool = False
    limiter: memory.Limiter | None = None
    fd: int = -1  # the read end of this start's output pipe
    wait_until: float | None = None  # a built-in init container waiting for its name (monotonic deadline)
    wait_poll: float = 0.0
    recorded: dict[str, Any] = field(default_factory=dict)  # orphans.record() of the running process
    config_errors: int = 0  # consecutive starts that could not be made (a subPath that leaves its volume)
    retry_config: bool = False  # the next start is another try of one that could not be made, not a restart

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    def started_at(self) -> str:
        """When the running start began (now, if the container is not running)."""
        return str(self.state.get("running", {}).get("startedAt") or now_rfc3339())

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "image": self.spec.get("image", ""),
            "imageID": self.spec.get("imageID", ""),  # (image mode: the repository at the manifest digest)
            "restartCount": self.restart_count,
            "ready": "running" in self.state,
            "started": "running" in self.state,
            "state": self.state,
            "lastState": self.last_state,
        }
        if self.process is not None and "running" in self.state:
            out["containerID"] = f"process://{self.process.pid}"
        return out


class Supervisor:
    def __init__(self, pod_dir: Path, view: isolation.View | None = None) -> None:
        """``view``: the shared part of a pod view, built while this process waited as a spare."""
        self.dir = pod_dir
        self.view = view
        self.spec: dict[str, Any] = json.loads((pod_dir / SPEC).read_text())
        self.inits = [Container(c, True) for c in self.spec.get("initContainers") or []]
        self.mains = [Container(c, False) for c in self.spec.get("containers") or []]
        backoff = self.spec.get("backoff") or {}
        self.backoff_initial = float(backoff.get("initial", 10.0))
        self.backoff_max = float(backoff.get("max", 300.0))
        self.backoff_reset = float(backoff.get("reset", 600.0))
        self.policy = str(self.spec.get("restartPolicy") or "Always")
        self.grace = float(self.spec.get("gracePeriod", 30.0))
        self.selector = selectors.DefaultSelector()
        self.writers: dict[int, podlogs.LogWriter] = {}
        self.pipes: dict[int, Any] = {}
        self.phase = PENDING
        self.reason: str | None = None
        self.message: str | None = None
        self.terminating = False
        self.init_index = 0
        self.started_at = now_rfc3339()
        self.notify_path = self.spec.get("notify")
        self.notifier = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notifier.setblocking(False)
        self.in_view = False  # this process entered the pod's view: containers start plainly in it
        self.sandbox = isolation.Sandbox.from_dict(self.spec.get("sandbox"))
        self.logs = str(self.spec.get("logs") or pod_dir)
        # The data directory, held open: its link count drops to 0 once it is deleted, which a
        # path could not tell inside the pod's view (there it is covered by an empty tmpfs).
        self.home = _open_directory(self.spec.get("home"))
        self.home_checked = time.monotonic()

    # -- state ------------------------------------------------------------------------------
    def write_state(self, done: bool = False) -> None:
        state = {
            "supervisor": os.getpid(),
            "startTime": self.started_at,
            "phase": self.phase,
            "reason": self.reason,
            "message": self.message,
            "initContainerStatuses": [c.status() for c in self.inits],
            "containerStatuses": [c.status() for c in self.mains],
            # pid and start time of each running container, for the agent should this supervisor die
            "processes": {
                c.name: c.recorded
                for c in self.inits + self.mains
                if c.process is not None and c.process.returncode is None and c.recorded
            },
            "done": done,
        }
        tmp = self.dir / (STATE + ".tmp")
        try:
            tmp.write_text(json.dumps(state))
            os.replace(tmp, self.dir / STATE)
        except OSError as exc:
            # A full disk must not end the supervisor (its containers would run unsupervised): the
            # next change writes the state again.
            print(f"cannot write {STATE}: {exc}", flush=True)
            return
        if self.notify_path:
            with contextlib.suppress(OSError):
                self.notifier.sendto(str(self.spec["uid"]).encode(), self.notify_path)

    # -- containers -------------------------------------------------------------------------
    def enter_pod_view(self) -> None:
        """Enter one view for the whole pod before the first start, when the containers that read
        their mounts share them and none mounts a ``subPath`` (resolved at each start). Each start
        is then a plain spawn (vfork) in that view, not a fork that builds a mount namespace, and
        the namespace goes when the supervisor ends, after its last report, not with each container
        (tearing one down waits for an RCU grace period). The view hides the data directory from
        this process too: what it writes there (its state, the logs, the agent's socket) it reaches
        through descriptors opened before (``_anchor``)."""
        if self.spec.get("isolation") != isolation.NAMESPACE:
            return
        readers = [c for c in self.inits + self.mains if not c.spec.get("builtin")]
        if not readers or len({json.dumps(c.spec.get("mounts") or [], sort_keys=True) for c in readers}) != 1:
            return
        mounts = [isolation.Mount.from_dict(m) for m in readers[0].spec.get("mounts") or []]
        if any(m.sub_path for m in mounts):
            return
        workdirs = tuple(str(c.spec["workdir"]) for c in readers if c.spec.get("workdir"))
        try:
            view = self.view or isolation.prepare(str(readers[0].spec["rootfs"]), sandbox=self.sandbox)
            self._anchor()
            view.finish(mounts, None, workdirs)
        except OSError as exc:
            print(f"cannot enter the pod's view ({exc}); each container builds its own", flush=True)
            return
        self.in_view = True

    def _anchor(self) -> None:
        """Reach the pod's directory, the logs and the agent's socket through descriptors from now
        on (``/proc/self/fd/N``): the view about to be entered covers them. The descriptors are
        close-on-exec, and no container may read another process's (``privileges``)."""
        opened: dict[str, str] = {}

        def anchored(directory: str) -> str:
            if directory not in opened:
                fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
                opened[directory] = f"/proc/self/fd/{fd}"
            return opened[directory]

        def file_in(path: str) -> str:
            directory, name = os.path.split(path)
            return f"{anchored(directory)}/{name}"

        self.dir = Path(anchored(str(self.dir)))
        self.logs = anchored(self.logs)
        if self.notify_path:
            self.notify_path = file_in(str(self.notify_path))
        for c in self.inits:  # the addresses a built-in init container waits for (the node's endpoints)
            wait = c.spec.get("waitFor") or {}
            if wait.get("path"):
                wait["path"] = file_in(str(wait["path"]))
            if wait.get("paths"):
                wait["paths"] = [file_in(str(path)) for path in wait["paths"]]

    def start(self, c: Container) -> None:
        spec = c.spec
        if spec.get("builtin"):
            self.start_builtin(c)
            return
        mounts = [isolation.Mount.from_dict(m) for m in spec.get("mounts") or []]
        workdir = spec.get("workdir")
        rootfs = spec.get("rootfs")
        identity = privileges.Identity.from_dict(spec.get("identity"))
        # A view of its own (built in the child: a fork and a mount namespace) unless the pod's
        # view (``enter_pod_view``) serves every container.
        mode = None if self.in_view else self.spec.get("isolation")
        if mode == isolation.NAMESPACE:
            try:
                self.check_sub_paths(c, mounts)
            except safe.PathEscape as exc:
                self.cannot_create(c, str(exc))
                return
        c.limiter = memory.Limiter.create(spec.get("memoryLimit"), f"{self.spec['uid']}-{c.name}-{c.restart_count}")
        # identity: by subprocess itself (no Python in the child) when nothing else runs there
        in_child_identity = identity.capabilities != privileges.DEFAULT or identity.no_new_privs
        needs_child = c.limiter is not None or mode == isolation.NAMESPACE or in_child_identity
        sandbox = self.sandbox
        errors_r, errors_w = os.pipe() if needs_child else (-1, -1)

        def in_child() -> None:
            try:
                if c.limiter is not None:
                    c.limiter.join_self()
                if mode == isolation.NAMESPACE:
                    isolation.enter(str(rootfs), mounts, workdir, sandbox=sandbox)
                privileges.drop(identity)
            except BaseException as exc:  # what went wrong, for the container's log (subprocess says less)
                os.write(errors_w, f"{type(exc).__name__}: {exc}".encode()[:4000])
                raise

        as_user: dict[str, Any] = {}
        if not needs_child and identity.switches_user:
            as_user = {"user": identity.uid, "group": identity.gid, "extra_groups": identity.groups}
        try:
            if spec.get("oci") and not needs_child and not as_user:
                # a container of an image: its runner forked from here, not a fresh interpreter
                process: subprocess.Popen[bytes] | oci_run.Forked = oci_run.spawn(
                    str(spec["oci"]["bundle"]), dict(spec.get("env") or {})
                )
            else:
                process = subprocess.Popen(
                    spec["argv"],
                    env=spec.get("env") or {},
                    cwd=None if mode == isolation.NAMESPACE else workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    # no Python in the child when there is nothing to set up: subprocess can then use
                    # vfork, which costs the pod a fraction of a fork of this process
                    preexec_fn=in_child if needs_child else None,
                    close_fds=True,
                    pass_fds=(errors_w,) if needs_child else (),
                    **as_user,
                )
        except (OSError, subprocess.SubprocessError) as exc:
            # Like a container runtime failing to start the entrypoint (exit code 128).
            why = _read_all(errors_r) if needs_child else ""
            log = podlogs.LogWriter(self.log_path(c))
            log.write(f"failed to start {spec['argv'][:1]}: {why or exc}\n")
            log.close()
            c.started_once = True
            self.finished(c, 128, "StartError", why or str(exc), now_rfc3339(), started=now_rfc3339())
            return
        finally:
            if needs_child:
                os.close(errors_w)
                os.close(errors_r)
        # The log file after the spawn: creating it (and its directories) on a slow disk would
        # delay every start; meanwhile the output waits in the pipe.
        log = podlogs.LogWriter(self.log_path(c))
        c.process = process
        c.recorded = orphans.record(process.pid)
        c.started_mono = time.monotonic()
        c.started_once = True
        c.oom = False
        c.config_errors = 0
        c.state = {"running": {"startedAt": now_rfc3339()}}
        c.restart_at = None
        assert process.stdout is not None
        fd = process.stdout.fileno()
        os.set_blocking(fd, False)
        c.fd = fd
        self.writers[fd] = log
        self.pipes[fd] = process.stdout
        self.selector.register(fd, selectors.EVENT_READ, process.stdout)

    def check_sub_paths(self, c: Container, mounts: list[isolation.Mount]) -> None:
        """Each ``subPath`` of this start, checked as the kubelet does right before the container
        starts (after the init containers ran); the child opens it again to mount it (``View.finish``).
        A path that leads out of its volume is :class:`paths.PathEscape` in the kubelet's words."""
        for mount in mounts:
            if not mount.sub_path:
                continue
            try:
                os.close(safe.open_beneath(mount.source, mount.sub_path))
            except (safe.PathEscape, OSError) as exc:
                why = str(exc) if isinstance(exc, safe.PathEscape) else f"subPath {mount.sub_path!r}: {exc.strerror}"
                raise safe.PathEscape(
                    f'failed to prepare subPath for volumeMount "{mount.volume}" of container "{c.name}": {why}'
                ) from None

    def cannot_create(self, c: Container, message: str) -> None:
        """The container cannot be created this time (kubelet's ``CreateContainerConfigError``): it
        waits with that reason and is tried again after the restart back-off, never having run."""
        c.started_once = True
        c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": message}}
        delay = min(self.backoff_initial * (2**c.config_errors), self.backoff_max)
        c.config_errors += 1
        c.restart_at = time.monotonic() + delay
        c.retry_config = True
        print(f"container {c.name}: {message}", flush=True)

    def start_builtin(self, c: Container) -> None:
        """One of the operator's own init containers: no process. ``init-pytorch`` (``waitFor``)
        runs until its master's address is published (the agent does when the master's container
        runs: the name resolves once its pod is up, as a headless Service's does); the others have
        nothing left to do (their work is the node agent's) and complete at once."""
        at = now_rfc3339()
        c.started_once = True
        wait = c.spec.get("waitFor") or {}
        waiting = wait.get("waiting") or f"waiting for {wait.get('name')} to resolve"
        self.builtin_log(c, f"{waiting}\n" if _wait_paths(wait) else "done by the node\n")
        if not all(os.path.exists(path) for path in _wait_paths(wait)):
            c.state = {"running": {"startedAt": at}}
            c.started_mono = time.monotonic()
            limit = wait.get("timeout", 200.0)  # None: as long as it takes
            c.wait_until = c.started_mono + float(limit) if limit is not None else float("inf")
            c.wait_poll = 0.002
            return
        self.finished(c, 0, "Completed", "", at, started=at)

    def log_path(self, c: Container) -> Path:
        """``logs/<namespace>/<pod>/<container>/<restart>.log``: the log of the container's current start."""
        return Path(self.logs) / self.spec["namespace"] / self.spec["pod"] / c.name / f"{c.restart_count}.log"

    def builtin_log(self, c: Container, line: str) -> None:
        """What ``kubectl logs -c <init container>`` shows for a built-in one (its own log, appended)."""
        with contextlib.suppress(OSError):
            log = podlogs.LogWriter(self.log_path(c))
            log.write(line)
            log.close()

    def check_waits(self) -> bool:
        """Complete the built-in init containers whose name resolves now (or fail the ones that
        waited too long, as ``nslookup`` giving up after its tries exits 1)."""
        changed = False
        for c in self.inits:
            if c.wait_until is None:
                continue
            wait = c.spec.get("waitFor") or {}
            started = c.started_at()
            if all(os.path.exists(path) for path in _wait_paths(wait)):
                c.wait_until = None
                self.builtin_log(c, (wait.get("ready") or f"{wait.get('name')} resolves: its pod runs") + "\n")
                self.finished(c, 0, "Completed", "", now_rfc3339(), started)
                changed = True
            elif time.monotonic() >= c.wait_until:
                c.wait_until = None
                message = f"{wait.get('name', 'the master')} did not resolve: no pod with that address ran"
                self.builtin_log(c, message + "\n")
                self.finished(c, 1, "Error", message, now_rfc3339(), started)
                changed = True
            else:
                c.wait_poll = min(c.wait_poll * 2, 0.1)
        return changed

    def read_output(self, fd: int) -> bool:
        """Copy what is available on ``fd`` to its log; False at EOF (the log is closed)."""
        writer = self.writers.get(fd)
        if writer is None:
            return False
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return True
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                chunk = b""
            if not chunk:
                self.selector.unregister(fd)
                self.pipes.pop(fd).close()  # through its file object, which owns the descriptor
                writer.close()
                del self.writers[fd]
                return False
            writer.write(chunk.decode("utf-8", "replace"))

    def reap(self) -> bool:
        changed = False
        for c in self.inits + self.mains:
            p = c.process
            if p is None or p.returncode is not None:
                continue
            try:
                pid, status = os.waitpid(p.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = p.pid, 0
            if pid == 0:
                if c.limiter is not None and c.limiter.over(p.pid):
                    c.oom = True
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(p.pid, signal.SIGKILL)
                continue
            p.returncode = exit_code_of(status)
            if c.fd in self.writers and self.pipes.get(c.fd) is p.stdout:
                self.read_output(c.fd)
            code = p.returncode
            oom = c.oom or (c.limiter is not None and c.limiter.oom_killed())
            if c.limiter is not None:
                c.limiter.release()
                c.limiter = None
            started = c.started_at()
            if oom:
                reason, message = "OOMKilled", ""
                code = 137
            else:
                reason, message = ("Completed" if code == 0 else "Error"), ""
            self.finished(c, code, reason, message, now_rfc3339(), started)
            changed = True
        return changed

    def finished(self, c: Container, code: int, reason: str, message: str, at: str, started: str) -> None:
        terminated: dict[str, Any] = {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": at}
        if message:
            terminated["message"] = message
        c.state = {"terminated": terminated}
        c.process = None if c.process is None else c.process
        ran = time.monotonic() - c.started_mono
        if self.terminating:
            c.done = True
            return
        restart = self.policy == "Always" or (self.policy == "OnFailure" and code != 0)
        if c.init:
            restart = code != 0 and self.policy != "Never"
        if not restart:
            c.done = True
            return
        if ran >= self.backoff_reset:
            c.crashes = 0
        delay = min(self.backoff_initial * (2**c.crashes), self.backoff_max)
        c.crashes += 1
        c.restart_at = time.monotonic() + delay
        c.last_state = {"terminated": terminated}
        c.state = {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {delay:g}s restarting failed container={c.name} pod={self.spec['pod']}",
            }
        }

    def due_restarts(self) -> bool:
        changed = False
        now = time.monotonic()
        for c in self.inits + self.mains:
            if c.restart_at is not None and c.restart_at <= now and not self.terminating:
                c.restart_at = None
                if c.retry_config:
                    c.retry_config = False  # never ran: not a restart
                else:
                    c.restart_count += 1
                self.start(c)
                changed = True
        return changed

    # -- phases -----------------------------------------------------------------------------
    def advance(self) -> None:
        """Start what is due next and compute the pod phase."""
        while self.init_index < len(self.inits):
            c = self.inits[self.init_index]
            if not c.started_once:
                self.start(c)
                if not c.done:
                    return
            if c.done:
                code = c.state["terminated"]["exitCode"]
                if code != 0:
                    self.phase, self.reason = FAILED, None
                    self.message = f"init container {c.name} exited with code {code}"
                    return
                self.init_index += 1
                continue
            return
        for c in self.mains:
            if not c.started_once:
                self.start(c)
        if all(c.done for c in self.mains):
            codes = [c.state["terminated"]["exitCode"] for c in self.mains]
            self.phase = SUCCEEDED if all(code == 0 for code in codes) else FAILED
        elif any("waiting" not in c.state or c.last_state for c in self.mains):
            self.phase = RUNNING
        else:
            self.phase = PENDING  # no container could be created yet (CreateContainerConfigError)

    def next_timeout(self) -> float | None:
        due = [c.restart_at for c in self.inits + self.mains if c.restart_at is not None]
        timeout = max(0.0, min(due) - time.monotonic()) if due else None
        if any(c.limiter is not None and c.limiter.needs_polling for c in self.inits + self.mains):
            timeout = memory.POLL_INTERVAL if timeout is None else min(timeout, memory.POLL_INTERVAL)
        if self.home >= 0:
            timeout = HOME_CHECK_INTERVAL if timeout is None else min(timeout, HOME_CHECK_INTERVAL)
        for c in self.inits:
            if c.wait_until is not None:
                timeout = c.wait_poll if timeout is None else min(timeout, c.wait_poll)
        return timeout

    def home_deleted(self) -> bool:
        """Whether the data directory was deleted (checked every ``HOME_CHECK_INTERVAL``): then no
        daemon will ever adopt this pod, and the supervisor stops it rather than wait for ever."""
        now = time.monotonic()
        if self.home < 0 or now - self.home_checked < HOME_CHECK_INTERVAL:
            return False
        self.home_checked = now
        try:
            gone = os.fstat(self.home).st_nlink == 0
        except OSError:
            return False
        if gone:
            self.terminating = True
            self.message = f"the data directory {self.spec.get('home')} was deleted; no daemon can adopt this pod"
            print(f"{self.message}: stopping its containers", flush=True)
        return gone

    def finished_pod(self) -> bool:
        return self.phase in (SUCCEEDED, FAILED)

    def stop_all(self) -> None:
        for c in self.inits:
            if c.wait_until is not None:  # a built-in init container still waiting: stopped like a process
                c.wait_until = None
                self.finished(c, 128 + signal.SIGTERM, "Error", "", now_rfc3339(), c.started_at())
        running = [c for c in self.inits + self.mains if c.process is not None and c.process.returncode is None]
        for c in running:
            assert c.process is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline and any(c.process and c.process.returncode is None for c in running):
            self.reap()
            time.sleep(0.01)
        for c in running:
            if c.process is not None and c.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.process.pid, signal.SIGKILL)
        while any(c.process and c.process.returncode is None for c in running):
            self.reap()
            time.sleep(0.005)

    def run(self) -> int:
        rfd, wfd = os.pipe()
        os.set_blocking(rfd, False)
        os.set_blocking(wfd, False)
        signal.set_wakeup_fd(wfd)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        self.selector.register(rfd, selectors.EVENT_READ, None)
        if self.spec.get("isolation") == isolation.NAMESPACE:
            # what the containers may keep as root; this process keeps its own to build views
            privileges.bound(privileges.DEFAULT)
        self.enter_pod_view()
        self.advance()
        self.write_state()
        while not self.terminating:
            for key, _ in self.selector.select(self.next_timeout()):
                if key.data is None:
                    with contextlib.suppress(BlockingIOError):
                        os.read(rfd, 4096)
                else:
                    self.read_output(key.fd)
            if self.home_deleted():
                break
            changed = self.reap()
            changed = self.check_waits() or changed
            changed = self.due_restarts() or changed
            if changed:
                self.advance()
                if self.finished_pod() and not self.writers:
                    break  # nothing left to drain: the final state below is the only write
                self.write_state()
            if self.finished_pod():
                break
        if self.terminating:
            self.stop_all()
            if not self.finished_pod():
                self.advance()
        # exec'd processes go with the pod's containers, as a runtime's go with the container's cgroup
        podexec.kill_registered(self.dir)
        # Output still buffered by processes that outlived their container (rare): drain briefly.
        deadline = time.monotonic() + 0.2
        while self.writers and time.monotonic() < deadline:
            for key, _ in self.selector.select(0.05):
                if key.data is not None:
                    self.read_output(key.fd)
        for writer in list(self.writers.values()):
            writer.close()
        self.write_state(done=True)
        return 0

    def _on_term(self, *_: Any) -> None:
        self.terminating = True


def _read_all(fd: int) -> str:
    """What a failed child wrote to its error pipe (its end is closed: the read does not block)."""
    os.set_blocking(fd, False)
    with contextlib.suppress(OSError):
        return os.read(fd, 4096).decode(errors="replace")
    return ""


def _open_directory(path: object) -> int:
    """A descriptor of ``path`` (close-on-exec, no access to its files), or -1."""
    if not path:
        return -1
    try:
        return os.open(str(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | getattr(os, "O_PATH", 0))
    except OSError:
        return -1


def _wait_paths(wait: dict[str, Any]) -> list[str]:
    """The files a built-in init container waits for (all of them)."""
    return [str(p) for p in wait.get("paths") or ([wait["path"]] if wait.get("path") else [])]


def main(pod_dir: str, view: isolation.View | None = None) -> int:
    path = Path(pod_dir)
    lock = open(path / LOCK, "a+")  # noqa: SIM115 - held for the supervisor's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 3  # another supervisor runs this pod
    (path / "supervisor.pid").write_text(str(os.getpid()))
    return Supervisor(path, view).run()
