"""The zygote's template view (``isolation.Template``): built once, copied into each pod's
supervisor by one ``unshare``. What a user relies on stays as with a view built per pod: each copy
shows its own pod's volume at a path two pods share, what one pod mounts never reaches the template
or the next pod, the data directory stays covered, and a host mount made after the template was
built reaches the pods once the template is built again (``refresh``, as the zygote does when it is
stale and idle).

Real mounts, so only as root on Linux. The scenario runs in a child process that first takes a
private mount namespace of its own, which stands for the host: nothing is mounted on the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0, reason="mount namespaces as root (Linux)"
)

SCENARIO = r"""
import json, os, sys
from airflow_provider_training.embedded.node import isolation as iso

base = sys.argv[1]
m = iso._Mounter()
m.unshare()                                       # this process's namespace stands for the host
m.mount(None, "/", None, iso._MS_REC | iso._MS_PRIVATE)
root, hidden = f"{base}/view-root", f"{base}/data"
open(f"{hidden}/admin-token", "w").write("secret")
os.makedirs(f"{base}/late", exist_ok=True)
go, told = os.pipe()
host = os.fork()
if host == 0:  # stays in the "host" namespace: mounts there once told, after the template exists
    os.close(told)
    os.read(go, 1)
    m.mount("tmpfs", f"{base}/late", "tmpfs", 0, "mode=755")
    open(f"{base}/late/mark", "w").close()
    os._exit(0)
os.close(go)
template = iso.Template(root, ("/pod-volume",), iso.Sandbox((hidden,), ()), max_age=60.0)
assert template.build()

def pod(volume, extra=None):
    # a supervisor: copy the template, add the pod's volume, enter the view, report what it sees
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        out = {}
        try:
            view = template.copy()
            view.finish([iso.Mount(volume, "/pod-volume")], None)
            out["volume"] = open("/pod-volume/name").read()
            out["data_dir"] = sorted(os.listdir(hidden)) if os.path.isdir(hidden) else None
            out["late"] = os.path.exists(f"{base}/late/mark")
            if extra:  # hostile: the pod mounts over a path the next pod shows too
                os.makedirs("/pod-volume/sub", exist_ok=True)
                m.mount("tmpfs", "/tmp", "tmpfs", 0, "mode=755")
                open("/tmp/left-by-a-pod", "w").close()
            out["tmp"] = sorted(os.listdir("/tmp"))
        except Exception as exc:
            out["error"] = repr(exc)
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data)

result = {"a": pod(f"{base}/vol-a", extra=True), "b": pod(f"{base}/vol-b")}
result["template_sees_pod_mounts"] = any(
    "/pod-volume" in line.split()[4] and root not in line.split()[4]
    for line in open("/proc/self/mountinfo")
)
os.write(told, b"x")                                      # a host mount made after the template
os.waitpid(host, 0)
result["before_refresh"] = pod(f"{base}/vol-a")
assert template.build()                                    # what the zygote does when it is stale
result["after_refresh"] = pod(f"{base}/vol-a")
print(json.dumps(result))
"""


def test_pods_copied_from_the_template_see_their_own_volume_and_leave_nothing_behind(tmp_path: Path) -> None:
    for directory in ("view-root", "data", "vol-a", "vol-b"):
        (tmp_path / directory).mkdir()
    (tmp_path / "vol-a" / "name").write_text("a")
    (tmp_path / "vol-b" / "name").write_text("b")
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO, str(tmp_path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    a, b = result["a"], result["b"]
    assert "error" not in a and "error" not in b, result
    # each pod its own volume at the one path both mount
    assert (a["volume"], b["volume"]) == ("a", "b"), result
    # the data directory stays covered in every copy (its admin token is not there)
    assert a["data_dir"] == [] and b["data_dir"] == [], result
    # what pod a mounted in its view is neither in pod b's view nor in the template's namespace
    assert "left-by-a-pod" in a["tmp"] and "left-by-a-pod" not in b["tmp"], result
    assert result["template_sees_pod_mounts"] is False, result
    # a host mount made later: not in copies of the old template, in those of the rebuilt one
    assert result["before_refresh"]["late"] is False, result
    assert result["after_refresh"]["late"] is True and result["after_refresh"]["volume"] == "a", result
