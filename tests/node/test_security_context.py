"""securityContext on the embedded node (issue 25 item 10): runAsUser / runAsGroup (the container's
win over the pod's), supplementalGroups, fsGroup on the volumes the pod writes and reads as the
kubelet sets them, runAsNonRoot refused with kubelet's words, capabilities and
allowPrivilegeEscalation applied; what is not enforced is named in one Warning event."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.embedded import ControlPlane
from airflow_provider_training.embedded.resources import PODS
from tests.conformance.conftest import KUBECTL
from tests.node import sandbox_pods as pods
from tests.node.test_isolation import Node, pod, waiting
from tests.node.test_isolation import node as node  # the fixture, for the tests below
from tests.waiting import wait_for

# An interpreter any user may run: the one running the tests may sit under /root (0700), which
# is the host's, and a container running as another user cannot execute it (nor could it an
# image's file it may not read).
PUBLIC_PYTHON = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")

TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
WHO = (
    "import json, os, stat\n"
    "def st(p):\n"
    "    s = os.stat(p); return [oct(stat.S_IMODE(s.st_mode)), s.st_uid, s.st_gid]\n"
    "out = {'uid': os.getuid(), 'gid': os.getgid(), 'groups': sorted(os.getgroups())}\n"
    "try:\n"
    "    out['token'] = len(open('" + TOKEN + "').read()) > 0\n"
    "except OSError as exc:\n"
    "    out['token'] = type(exc).__name__\n"
    "out['token_stat'] = st('" + TOKEN + "')\n"
    "if os.path.isdir('/out'):\n"
    "    open('/out/written', 'w').write('x'); out['out'] = st('/out'); out['written'] = st('/out/written')\n"
    "if os.path.isdir('/cm'):\n"
    "    out['cm'] = open('/cm/k').read(); out['cm_stat'] = st('/cm/k')\n"
    "print(json.dumps(out))\n"
)


def _who(**extra: Any) -> dict[str, Any]:
    return pods.container(WHO, command=[PUBLIC_PYTHON, "-c", WHO], **extra)


def test_a_pod_runs_as_its_users_and_groups_with_its_volumes_owned_by_fs_group(
    kube_api: Any, test_namespace: str, control_plane: ControlPlane
) -> None:
    from kubernetes import client

    client.CoreV1Api(kube_api).create_namespaced_config_map(
        test_namespace, {"metadata": {"name": "cm"}, "data": {"k": "v"}}
    )
    main = _who(volumeMounts=[{"name": "out", "mountPath": "/out"}, {"name": "cm", "mountPath": "/cm"}])
    other = _who(name="other", securityContext={"runAsUser": 1001, "runAsGroup": 1001})
    pods.create(
        kube_api,
        test_namespace,
        "users",
        securityContext={"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000, "supplementalGroups": [4000]},
        containers=[main, other],
        volumes=[{"name": "out", "emptyDir": {}}, {"name": "cm", "configMap": {"name": "cm"}}],
    )
    pods.wait_phase(kube_api, test_namespace, "users", ("Succeeded", "Failed"))
    seen = pods.last_json(pods.logs(kube_api, test_namespace, "users", "main"))
    assert (seen["uid"], seen["gid"]) == (1000, 3000)
    assert {2000, 3000, 4000} <= set(seen["groups"])
    # the token: 0600 (two users in the pod, so owned by root) plus the fsGroup's read, as kubelet's
    assert seen["token"] is True and seen["token_stat"] == ["0o640", 0, 2000]
    # the emptyDir: group fsGroup, setgid, group-writable; what the pod writes there inherits the group
    assert seen["out"][0] == "0o2777" and seen["out"][2] == 2000
    assert seen["written"][1:] == [1000, 2000]
    assert seen["cm"] == "v" and seen["cm_stat"] == ["0o644", 0, 2000]
    theirs = pods.last_json(pods.logs(kube_api, test_namespace, "users", "other"))
    assert (theirs["uid"], theirs["gid"]) == (1001, 1001)  # the container's securityContext wins
    uid = pods.read(kube_api, test_namespace, "users").metadata.uid
    written = control_plane.home / "node" / "emptydir" / uid / "out" / "written"
    assert (written.stat().st_uid, written.stat().st_gid) == (1000, 2000)  # on the host as in the pod
    assert pods.read(kube_api, test_namespace, "users").status.phase == "Succeeded"


def test_one_run_as_user_owns_the_token_and_kubectl_exec_runs_as_it(
    kube_api: Any, test_namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    sleeper = pods.container("", command=[PUBLIC_PYTHON, "-c", "import time; time.sleep(120)"])
    nobody = 54321  # a user the host does not know: no group of its own to take
    with pytest.raises(KeyError):
        pwd.getpwuid(nobody)
    pods.create(kube_api, test_namespace, "alone", securityContext={"runAsUser": nobody}, containers=[sleeper])
    pods.wait_phase(kube_api, test_namespace, "alone", ("Running",))
    env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig), "KUBECACHEDIR": str(tmp_path)}
    done = subprocess.run(
        [str(KUBECTL), "-n", test_namespace, "exec", "alone", "--", str(PUBLIC_PYTHON), "-c", WHO],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = pods.last_json(done.stdout)
    assert (seen["uid"], seen["gid"]) == (nobody, 0)  # no runAsGroup, no such user: group 0, as a runtime's
    assert seen["token"] is True and seen["token_stat"] == ["0o600", nobody, 0]  # kubelet's fsUser owns it


def test_run_as_non_root_refuses_a_container_that_would_run_as_root(
    kube_api: Any, test_namespace: str, control_plane: ControlPlane
) -> None:
    pods.create(kube_api, test_namespace, "no-user", securityContext={"runAsNonRoot": True})
    pods.create(
        kube_api,
        test_namespace,
        "root-user",
        securityContext={"runAsNonRoot": True, "runAsUser": 1000},
        containers=[pods.container("print('ok')", securityContext={"runAsUser": 0})],
    )
    fine = pods.container("", command=[PUBLIC_PYTHON, "-c", "print('ok')"])
    pods.create(
        kube_api, test_namespace, "fine", securityContext={"runAsNonRoot": True, "runAsUser": 1000}, containers=[fine]
    )

    def message(name: str) -> str:
        statuses = pods.read(kube_api, test_namespace, name).status.container_statuses or []
        state = statuses[0].state.waiting if statuses else None
        return state.message if state is not None and state.reason == "CreateContainerConfigError" else ""

    no_user = wait_for(lambda: message("no-user"), 20, "no-user's refusal")
    uid = pods.read(kube_api, test_namespace, "no-user").metadata.uid
    assert no_user == (
        f"container has runAsNonRoot and image will run as root (pod: 'no-user_{test_namespace}({uid})', "
        "container: main)"
    )
    root_user = wait_for(lambda: message("root-user"), 20, "root-user's refusal")
    assert root_user.startswith("container's runAsUser breaks non-root policy (pod: ")
    assert ("Warning", "Failed", f"Error: {no_user}") in pods.events(kube_api, test_namespace, "no-user")
    pods.wait_phase(kube_api, test_namespace, "fine", ("Succeeded",))
    assert pods.read(kube_api, test_namespace, "no-user").status.phase == "Pending"


CAPS = (
    "import json\n"
    "status = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
    "print(json.dumps({k: status[k].strip() for k in ('CapEff', 'CapBnd', 'NoNewPrivs')}))\n"
)


def test_capabilities_and_privilege_escalation_are_applied_and_the_rest_is_named(
    kube_api: Any, test_namespace: str
) -> None:
    asks = {
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "privileged": True,
        "capabilities": {"add": ["SYS_ADMIN", "CAP_NET_ADMIN"], "drop": ["NET_RAW"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    dropped_all = pods.container(CAPS, name="none", securityContext={"capabilities": {"drop": ["ALL"]}})
    pods.create(
        kube_api,
        test_namespace,
        "caps",
        securityContext={"sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]},
        containers=[pods.container(CAPS, securityContext=asks), dropped_all],
    )
    pods.wait_phase(kube_api, test_namespace, "caps", ("Succeeded", "Failed"))
    seen = pods.last_json(pods.logs(kube_api, test_namespace, "caps", "main"))
    effective = int(seen["CapEff"], 16)
    assert not effective & (1 << 21) and not effective & (1 << 12)  # SYS_ADMIN, NET_ADMIN: not granted
    assert not effective & (1 << 13) and effective & (1 << 0)  # NET_RAW dropped, CHOWN kept
    assert seen["NoNewPrivs"] == "1"
    assert int(pods.last_json(pods.logs(kube_api, test_namespace, "caps", "none"))["CapEff"], 16) == 0
    found = [(t, m) for t, r, m in pods.events(kube_api, test_namespace, "caps") if r == "SecurityContextNotEnforced"]
    assert len(found) == 1 and found[0][0] == "Warning"  # one event for the pod, naming each field
    warnings = [found[0][1]]
    for named in (
        "containers[0].securityContext.readOnlyRootFilesystem",
        "containers[0].securityContext.privileged",
        "containers[0].securityContext.seccompProfile",
        "containers[0].securityContext.capabilities.add ['SYS_ADMIN', 'NET_ADMIN']",
        "spec.securityContext.sysctls",
    ):
        assert named in warnings[0], (named, warnings[0])
    assert "allowPrivilegeEscalation" not in warnings[0] and "drop" not in warnings[0]


@pytest.mark.parametrize(
    ("context", "named"),
    [
        ({"runAsUser": -1}, "spec.securityContext.runAsUser: -1"),
        ({"runAsUser": 2**40}, f"spec.securityContext.runAsUser: {2**40}"),
        ({"runAsGroup": "root"}, "spec.securityContext.runAsGroup: 'root'"),
        ({"fsGroup": True}, "spec.securityContext.fsGroup: True"),
        ({"supplementalGroups": "wheel"}, "supplementalGroups must be a list"),
    ],
)
def test_an_id_that_is_none_is_refused_by_the_node_naming_the_field(
    node: Node, context: dict[str, Any], named: str
) -> None:
    """Written around the API (as an older daemon could have stored it): the pod waits with the
    field named, and nothing runs as a user nobody asked for."""
    node.store.create(PODS.key, pod("bad", securityContext=context))
    wait_for(lambda: waiting(node.pod("bad")).get("reason") == "CreateContainerConfigError", 20, "the refusal")
    assert named in waiting(node.pod("bad"))["message"]


if sys.platform != "linux" or os.geteuid() != 0 or PUBLIC_PYTHON is None:  # pragma: no cover
    pytestmark = pytest.mark.skip("switching users needs a node that runs as root, and a python3 anyone may run")
