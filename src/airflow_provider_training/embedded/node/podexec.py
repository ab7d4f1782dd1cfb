"""``kubectl exec`` for the processes of the embedded node: what MPI's ``kubexec.sh`` calls.

The MPIJob launcher's ``/opt/kube/kubectl`` is a small script the node agent delivers in place of
the ``kubectl-delivery`` init container; it runs ``entry.py exec NODE_DIR NAMESPACE exec POD
[--container C] -- ARGV``. ``POD`` is what the hostfile says: a pod name, or the pod's loopback
address. ARGV then runs with the target container's environment, working directory and mounts,
as the same command would inside that pod (it is not a child of the pod's supervisor, as an exec'd
process is not a child of the container's init either). Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded.node import isolation, orted, privileges, proctree
from airflow_provider_training.embedded.node import safepaths as safe

SPEC = "spec.json"
# One file per exec'd process of the pod (its pid; its start time inside): what the pod's supervisor
# kills when the pod ends, as a runtime kills an exec'd process with its container.
EXECS = "execs"
BROKER_SOCKET = "exec.sock"  # in ``<home>/node/bin``, served by the node agent (``execbroker``)


def find_pod(node_dir: Path, namespace: str, pod: str) -> tuple[Path, dict[str, Any]] | None:
    for spec_path in (node_dir / "pods").glob(f"*/{SPEC}"):
        try:
            spec = json.loads(spec_path.read_text())
        except (OSError, ValueError):
            continue
        ours = spec.get("namespace") == namespace and pod in (spec.get("pod"), spec.get("podIP"))
        if ours and not (spec_path.parent / "deleted").exists():
            return spec_path.parent, spec
    return None


def register(pod_dir: Path, pid: int) -> Path | None:
    """Record exec'd process ``pid`` (and its tree) as the pod's; None when the pod is ending."""
    found = proctree.stat(pid)
    entry = pod_dir / EXECS / str(pid)
    try:
        entry.parent.mkdir(exist_ok=True)
        entry.write_text(str(found.starttime if found is not None else ""))
    except OSError:  # the pod's directory is gone: so is the pod
        proctree.kill_tree(pid)
        return None
    if (pod_dir / "deleted").exists():
        kill_registered(pod_dir)  # it ended while this one started
        return None
    return entry


def _recorder(pod_dir: Path) -> Callable[[int], None] | None:
    """``register`` for a process started after this one entered the pod's view."""
    try:
        (pod_dir / EXECS).mkdir(exist_ok=True)
        directory = os.open(pod_dir / EXECS, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None

    def record(pid: int) -> None:
        found = proctree.stat(pid)
        fd = os.open(str(pid), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600, dir_fd=directory)
        with os.fdopen(fd, "w") as handle:
            handle.write(str(found.starttime if found is not None else ""))

    return record


def unregister(entry: Path | None) -> None:
    if entry is not None:
        entry.unlink(missing_ok=True)


def kill_registered(pod_dir: Path) -> int:
    """Kill every exec'd process tree of the pod (the pod ended). Returns how many were signalled."""
    signalled = 0
    try:
        entries = list((pod_dir / EXECS).iterdir())
    except OSError:
        return 0
    for entry in entries:
        try:
            pid, recorded = int(entry.name), entry.read_text().strip()
        except (OSError, ValueError):
            continue
        signalled += proctree.kill_tree(pid, int(recorded) if recorded.isdigit() else None)
        entry.unlink(missing_ok=True)
    return signalled


def direct(
    node_dir: Path, namespace: str, pod: str, container: str, command: list[str]
) -> tuple[list[str], dict[str, str]] | None:
    """argv and environment that run ``command`` in the running ``container`` through util-linux's
    ``nsenter`` (its mount view, root and working directory), with no Python in between: what the
    API server's exec uses when it can (root, nsenter present, the container running). None: use
    ``entry.py exec`` instead."""
    nsenter = shutil.which("nsenter")
    found = find_pod(node_dir, namespace, pod)
    if nsenter is None or os.geteuid() != 0 or found is None:
        return None
    pod_dir, spec = found
    everyone = (spec.get("containers") or []) + (spec.get("initContainers") or [])  # a running init container too
    chosen = next((c for c in everyone if c["name"] == container), None)
    if chosen is not None and chosen.get("oci"):  # a container of an image: runc exec
        from airflow_provider_training.embedded.node.oci.run import exec_argv

        oci_argv = exec_argv(str(chosen["oci"]["bundle"]), command)
        return (oci_argv, {"PATH": os.defpath}) if oci_argv is not None else None
    pid = _container_pid(pod_dir, container)
    if chosen is None or pid is None:
        return None
    # the container's user, groups and capabilities, as its own processes have them
    drop: list[str] = []
    if (
        spec.get("isolation") == isolation.NAMESPACE
        or privileges.Identity.from_dict(chosen.get("identity")).switches_user
    ):
        found_drop = privileges.setpriv_argv(privileges.Identity.from_dict(chosen.get("identity")))
        if found_drop is None:
            return None
        drop = found_drop
    # -w without a directory: the container process's own (its workingDir); nsenter would open a
    # given directory in the host's view, before entering the container's
    argv = [nsenter, "-t", str(pid), "-m", "-r", "-w", "--", *drop, *command]
    return argv, dict(chosen.get("env") or {})


def _container_pid(pod_dir: Path, name: str) -> int | None:
    """The running container's process (``containerID: process://PID`` in the supervisor's state)."""
    try:
        state = json.loads((pod_dir / "state.json").read_text())
        for status in (state.get("containerStatuses") or []) + (state.get("initContainerStatuses") or []):
            if status.get("name") == name and "running" in (status.get("state") or {}):
                return int(str(status.get("containerID", "")).removeprefix("process://"))
    except (OSError, ValueError, TypeError):
        return None
    return None


def main(argv: list[str]) -> int:
    # argv: NODE_DIR NAMESPACE exec POD [--container C | -c C | -i | -t | -it] -- ARGV...
    if len(argv) < 4 or argv[2] != "exec":
        print("usage: kubectl exec POD [--container NAME] -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    node_dir, namespace, pod = Path(argv[0]), argv[1], argv[3]
    rest = argv[4:]
    container: str | None = None
    while rest and rest[0] != "--":
        flag = rest.pop(0)
        if flag in ("--container", "-c") and rest:
            container = rest.pop(0)
        elif flag.startswith("--container="):
            container = flag.split("=", 1)[1]
    command = rest[1:] if rest else []
    if not command:
        print("error: you must specify at least one command for the container", file=sys.stderr)
        return 2
    if not (node_dir / "pods").is_dir() and (node_dir / "bin" / BROKER_SOCKET).exists():
        # inside a pod's view (an MPI launcher's kubectl or rsh agent): the node runs it
        from airflow_provider_training.embedded.node import execclient

        return execclient.forward(str(node_dir / "bin" / BROKER_SOCKET), argv[2:])
    found = find_pod(node_dir, namespace, pod)
    if found is None:
        print(f'Error from server (NotFound): pods "{pod}" not found', file=sys.stderr)
        return 1
    pod_dir, spec = found
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    chosen = next((c for c in containers if container in (None, c["name"])), None)
    if chosen is None:
        print(f"error: container {container} not found in pod {pod}", file=sys.stderr)
        return 1
    if chosen.get("oci"):  # a container of an image: runc exec, as the API server's exec does
        from airflow_provider_training.embedded.node.oci.run import exec_argv

        oci_argv = exec_argv(str(chosen["oci"]["bundle"]), command)
        if oci_argv is None:
            print(f"error: container {chosen['name']} of pod {pod} is not running", file=sys.stderr)
            return 1
        os.execv(oci_argv[0], oci_argv)
    env = dict(chosen.get("env") or {})
    identity = privileges.Identity.from_dict(chosen.get("identity"))
    daemon = orted.hnp_address(command) is not None
    record = _recorder(pod_dir) if daemon else None  # opened before the pod's view hides the node's files
    mounts = [isolation.Mount.from_dict(m) for m in chosen.get("mounts") or []]
    workdir = chosen.get("workdir")
    pid = _container_pid(pod_dir, chosen["name"])
    try:
        if pid is not None and isolation.join(pid, workdir):
            pass  # inside the running container's own view, as a runtime's exec
        elif spec.get("isolation") == isolation.NAMESPACE:
            rootfs = pod_dir / f"exec-{os.getpid()}"
            rootfs.mkdir(exist_ok=True)
            sandbox = isolation.Sandbox.from_dict(spec.get("sandbox"))
            isolation.enter(str(rootfs), mounts, workdir, sandbox=sandbox)
        elif workdir:
            os.chdir(workdir)
    except (OSError, safe.PathEscape) as exc:
        print(f"error: cannot enter container {chosen['name']} of pod {pod}: {exc}", file=sys.stderr)
        return 1
    if daemon:
        # this process keeps the node's privileges to watch the daemon (no container may read a
        # process with more capabilities than its own); the daemon gets the container's
        return orted.run(command, env, pod, record, lambda: privileges.drop(identity))
    try:
        privileges.drop(identity)
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"exec {command[0]}: {exc.strerror}", file=sys.stderr)
        return 126 if exc.errno != 2 else 127
