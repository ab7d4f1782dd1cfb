"""A pod cannot reach the control plane's data directory (issue 25 item 6): not by its real path,
not through ``/proc`` (another process's root, working directory, descriptors or environment), not by
unmounting the mask, escaping a chroot, reading the disk, or changing a kernel setting; neither can
a command ``kubectl exec`` runs in it. Without mount namespaces the node says so on every pod."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.embedded import ControlPlane
from airflow_provider_training.embedded.node.privileges import CAPABILITIES, DEFAULT
from airflow_provider_training.embedded.resources import PODS
from tests.conformance.conftest import KUBECTL
from tests.node import sandbox_pods as pods
from tests.node.test_isolation import Node, phase, pod
from tests.waiting import wait_for

# Everything a root process in a pod might try, each attempt reported as ("read", what) or
# ("refused", error). argv: the data directory's real path, a scratch directory of the pod's own.
PROBE = r"""
import ctypes, json, os, stat, sys
home, scratch = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL("libc.so.6", use_errno=True)
report = {}

def attempt(name, fn):
    try:
        report[name] = ["read", fn()]
    except Exception as exc:
        report[name] = ["refused", type(exc).__name__]

def read(path):
    with open(path, "rb") as handle:
        return handle.read(4096).decode("latin-1")

attempt("token", lambda: read(home + "/token"))
attempt("key", lambda: read(home + "/serviceaccount.key"))
attempt("store", lambda: read(home + "/store.db"))
attempt("kubeconfig", lambda: read(home + "/kubeconfig"))
attempt("listing", lambda: os.listdir(home))
attempt("node", lambda: os.listdir(home + "/node") if os.path.isdir(home + "/node") else [])
attempt("runtime", lambda: os.listdir("/dev/shm/airflow-training-%d" % os.geteuid()))
attempt("old-root", lambda: os.listdir("/.host"))
# /proc: every other process's root, working directory, descriptors and environment
reached = []
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    for path in ("/proc/%s/root%s/token" % (pid, home), "/proc/%s/cwd/token" % pid, "/proc/%s/environ" % pid):
        try:
            reached.append([path, read(path)])
        except Exception:
            pass
    try:
        fds = os.listdir("/proc/%s/fd" % pid)
    except Exception:
        fds = []
    for fd in fds:
        try:
            reached.append(["/proc/%s/fd/%s" % (pid, fd), os.listdir("/proc/%s/fd/%s" % (pid, fd))])
        except Exception:
            pass
report["proc"] = ["read", reached]
daemon = sys.argv[3] if len(sys.argv) > 3 else ""
if daemon:
    attempt("daemon-root", lambda: read("/proc/%s/root%s/token" % (daemon, home)))
    attempt("daemon-environ", lambda: read("/proc/%s/environ" % daemon))
# unmount the mask, mount over something, escape a chroot
report["umount"] = [libc.umount2(home.encode(), 2), ctypes.get_errno()]
report["mount"] = [libc.mount(b"tmpfs", b"/mnt", b"tmpfs", 0, None), ctypes.get_errno()]
pid = os.fork()
if pid == 0:
    try:
        os.makedirs(scratch + "/jail", exist_ok=True)
        os.chroot(scratch + "/jail")
        os.chdir("../" * 64)
        os.chroot(".")
        os.write(1, ("escaped " + read(home + "/token") + "\n").encode())
    except Exception as exc:
        os.write(1, ("no escape: %s\n" % type(exc).__name__).encode())
    os._exit(0)
os.waitpid(pid, 0)
attempt("core_pattern", lambda: open("/proc/sys/kernel/core_pattern", "w").write("|/bin/true"))
attempt("uevent_helper", lambda: open("/sys/kernel/uevent_helper", "w").write("/bin/true"))
report["block-devices"] = [n for n in os.listdir("/dev") if stat.S_ISBLK(os.lstat("/dev/" + n).st_mode)]
report["caps"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")]
print(json.dumps(report))
"""


def _secrets(plane: ControlPlane) -> list[str]:
    """What must never come out of a pod: the admin token and the signing key."""
    key = (plane.home / "serviceaccount.key").read_bytes().decode("latin-1")
    return [plane.token, key[:64]]


def _check(report: dict[str, Any], output: str, plane: ControlPlane) -> None:
    for name in ("token", "key", "store", "kubeconfig", "daemon-root", "daemon-environ", "core_pattern"):
        if name in report:
            assert report[name][0] == "refused", (name, report[name])
    # the data directory's path shows an empty directory, but for the node's kit / kubectl shims
    assert report["listing"][0] == "read" and set(report["listing"][1]) <= {"node"}
    assert report["node"] in (["read", []], ["read", ["bin"]])
    assert report["runtime"] in (["read", []], ["refused", "FileNotFoundError"])
    assert report["old-root"] == ["read", []]
    assert report["umount"][0] != 0 and report["mount"][0] != 0  # EPERM: no CAP_SYS_ADMIN
    assert "no escape" in output and "escaped" not in output
    assert report["uevent_helper"][0] == "refused"
    assert report["block-devices"] == []
    for path, _ in report["proc"][1]:
        assert f"/proc/{plane.pid}/" not in path, path  # nothing of the daemon's
    for secret in _secrets(plane):
        assert secret not in output
    # as root, only Docker's default capabilities less MKNOD and SETFCAP
    assert int(report["caps"][0], 16) == sum(1 << CAPABILITIES[name] for name in DEFAULT)


def test_a_pod_reaches_nothing_of_the_data_directory(
    kube_api: Any, test_namespace: str, control_plane: ControlPlane
) -> None:
    home = str(control_plane.home.resolve())
    probe = pods.container(PROBE, command=[pods.PYTHON, "-c", PROBE, home, "/scratch", str(control_plane.pid)])
    probe["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    # a neighbour whose token and volumes the probe must not reach either
    neighbour = pods.create(
        kube_api, test_namespace, "neighbour", containers=[pods.container("import time; time.sleep(60)")]
    )
    pods.wait_phase(kube_api, test_namespace, neighbour, ("Running",))
    pods.create(kube_api, test_namespace, "prober", containers=[probe], volumes=[{"name": "scratch", "emptyDir": {}}])
    pods.wait_phase(kube_api, test_namespace, "prober", ("Succeeded", "Failed"))
    output = pods.logs(kube_api, test_namespace, "prober")
    report = pods.last_json(output)
    _check(report, output, control_plane)
    # the data directory is where the probe looked: the node's own files are there
    assert (control_plane.home / "token").is_file() and (control_plane.home / "serviceaccount.key").is_file()


def test_a_command_kubectl_execs_is_held_to_the_same(
    kube_api: Any, test_namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """The API server's exec enters the container's view with the container's capabilities and
    user, not the daemon's."""
    home = str(control_plane.home.resolve())
    sleeper = pods.container("import time; time.sleep(120)")
    sleeper["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    pods.create(kube_api, test_namespace, "target", containers=[sleeper], volumes=[{"name": "scratch", "emptyDir": {}}])
    pods.wait_phase(kube_api, test_namespace, "target", ("Running",))
    done = subprocess.run(
        [
            str(KUBECTL),
            "-n",
            test_namespace,
            "exec",
            "target",
            "--",
            pods.PYTHON,
            "-c",
            PROBE,
            home,
            "/scratch",
            str(control_plane.pid),
        ],
        env={**os.environ, "KUBECONFIG": str(control_plane.kubeconfig), "KUBECACHEDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    _check(pods.last_json(done.stdout), done.stdout, control_plane)


def test_without_mount_namespaces_every_pod_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where no view can be made (macOS, a kernel without namespaces; forced here), nothing is
    hidden: the daemon log says so once and each pod gets a Warning event saying so."""
    caplog.set_level(logging.WARNING, "airflow_provider_training.embedded.node.agent")
    monkeypatch.setenv("AIRFLOW_TRAINING_ISOLATION", "links")
    monkeypatch.setenv("AIRFLOW_TRAINING_ZYGOTE", "0")
    node = Node(tmp_path / "home")
    try:
        for name in ("a", "b"):
            node.store.create(PODS.key, pod(name))
        wait_for(lambda: all(phase(node.pod(n)) == "Succeeded" for n in ("a", "b")), 30, "pods")
        for name in ("a", "b"):
            warnings = [m for r, m in node.events(name) if r == "NoSandbox"]
            assert len(warnings) == 1 and "can read the control plane's data directory" in warnings[0]
        assert sum("cannot give pods a mount view" in r.getMessage() for r in caplog.records) == 1
    finally:
        node.stop()
