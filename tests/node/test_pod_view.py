"""How a pod's processes start: one mount view per pod (entered by its supervisor), the operator's
init containers done without a process, and init-pytorch waiting for the master as upstream."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from airflow_provider_training.embedded import ControlPlane
from airflow_provider_training.embedded.node import podspec
from airflow_provider_training.embedded.node.agent import NodeAgent, Tracked
from tests.controllers.jobs import Jobs
from tests.factories import job_document as job
from tests.factories import replica
from tests.waiting import wait_for

PROBE = (
    "import json, os; print(json.dumps({'ns': os.readlink('/proc/self/ns/mnt'), "
    "'token': os.path.exists('/var/run/secrets/kubernetes.io/serviceaccount/token')}))"
)


def _output(jobs: Jobs, pod: str) -> str:
    try:
        return jobs.logs(pod).strip()
    except client.ApiException:  # (not created yet)
        return ""


def _since_boot() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


def _started_since_boot(pid: int) -> float:
    """When process ``pid`` started, on the clock of ``/proc/uptime`` (psutil's wall-clock start
    time drifts with the boot time on a VM)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


def _pod_dir(plane: ControlPlane, pod: Any) -> Path:
    return plane.home / "node" / "pods" / pod.metadata.uid


def test_containers_start_in_the_view_their_supervisor_entered(
    kube_api: Any, test_namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    jobs = Jobs(kube_api, test_namespace)
    gate = tmp_path / "gate"  # (not in the data directory: no pod sees it)
    code = f"{PROBE}\nimport time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.02)"
    jobs.create(job("PyTorchJob", "viewed", {"Master": replica(code, restart="Never")}))
    wait_for(lambda: _output(jobs, "viewed-master-0"), 20, "the probe's output")
    seen = json.loads(jobs.logs("viewed-master-0").splitlines()[0])
    supervisor = int((_pod_dir(control_plane, jobs.pod("viewed-master-0")) / "supervisor.pid").read_text())
    try:
        assert seen["token"]  # the service-account volume is there, at its path
        assert seen["ns"] == os.readlink(f"/proc/{supervisor}/ns/mnt")  # the supervisor's own view
        assert seen["ns"] != os.readlink("/proc/self/ns/mnt")  # not the host's
        assert not Path("/var/run/secrets/kubernetes.io").exists()  # nothing made on the host
    finally:
        gate.touch()
    jobs.wait("PyTorchJob", "viewed", "Succeeded")


def test_a_volume_over_the_supervisors_files_hides_them_from_the_pod_not_from_its_supervisor(
    kube_api: Any, test_namespace: str, control_plane: ControlPlane
) -> None:
    """A view that hid the logs from the supervisor would lose them: the supervisor reaches them
    through descriptors opened before it entered the view, and the pod runs as before."""
    logs = control_plane.home / "logs"
    code = (
        f"{PROBE}\nopen({str(logs / 'inside.txt')!r}, 'w').write('in the volume')\n"
        f"print(sorted(os.listdir({str(logs)!r})))"
    )
    container = {"volumeMounts": [{"name": "scratch", "mountPath": str(logs)}]}
    spec = replica(code, restart="Never", container=container, volumes=[{"name": "scratch", "emptyDir": {}}])
    jobs = Jobs(kube_api, test_namespace)
    jobs.create(job("PyTorchJob", "covered", {"Master": spec}))
    jobs.wait("PyTorchJob", "covered", "Succeeded")
    lines = jobs.logs("covered-master-0").splitlines()
    supervisor_log = (_pod_dir(control_plane, jobs.pod("covered-master-0")) / "supervisor.log").read_text()
    assert json.loads(lines[0])["token"]
    assert lines[1] == "['inside.txt']"  # the container saw the emptyDir at the logs' path
    assert not (logs / "inside.txt").exists()  # and the host's logs were left alone
    assert "cannot" not in supervisor_log


def test_init_pytorch_waits_for_the_master_to_run_and_starts_no_process(kube_api: Any, test_namespace: str) -> None:
    """Upstream, a worker's init-pytorch loops on nslookup of the master until its pod is up: here
    the worker stays in its init container while the master cannot start, and goes on once it runs."""
    core = client.CoreV1Api(kube_api)
    waits = {"env": [{"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "lr"}}}]}
    jobs = Jobs(kube_api, test_namespace)
    jobs.create(
        job(
            "PyTorchJob",
            "ordered",
            {
                "Master": replica("print('master')", restart="Never", container=waits),
                "Worker": replica("print('worker')", restart="Never"),
            },
        )
    )

    def init_state() -> dict[str, Any]:
        try:
            statuses = jobs.pod("ordered-worker-0").status.init_container_statuses or []
        except client.ApiException:  # (not created yet)
            return {}
        return statuses[0].state.to_dict() if statuses else {}

    wait_for(lambda: (init_state().get("running") or {}).get("started_at"), 20, "init-pytorch running")
    worker = jobs.pod("ordered-worker-0")
    assert worker.status.phase == "Pending" and jobs.pod("ordered-master-0").status.phase == "Pending"
    assert all(
        cs.state.running is None and cs.state.terminated is None for cs in worker.status.container_statuses or []
    )
    core.create_namespaced_config_map(test_namespace, {"metadata": {"name": "later"}, "data": {"lr": "0.1"}})
    jobs.wait("PyTorchJob", "ordered", "Succeeded")
    wait_for(lambda: jobs.pod("ordered-worker-0").status.phase == "Succeeded", 20, "the worker to finish")
    terminated = init_state()["terminated"]
    assert (terminated["exit_code"], terminated["reason"]) == (0, "Completed")
    init_log = core.read_namespaced_pod_log("ordered-worker-0", test_namespace, container="init-pytorch")
    master_ip = jobs.pod("ordered-master-0").status.pod_ip
    assert f"waiting for {master_ip} to resolve" in init_log and f"{master_ip} resolves" in init_log
    assert "worker" in jobs.logs("ordered-worker-0")


def test_an_address_two_pods_share_stays_published_until_neither_runs(tmp_path: Path) -> None:
    """Where 127/8 is not routable every pod is 127.0.0.1: one pod going must not unpublish it for
    the workers of another job still waiting for their master."""
    agent = NodeAgent()
    agent.node_dir = tmp_path
    endpoints = podspec.endpoints_dir(tmp_path)
    endpoints.mkdir()
    first, second = (Tracked(uid, "ns", uid, tmp_path / uid, address="127.0.0.1") for uid in ("a", "b"))
    agent.tracked = {"a": first, "b": second}
    for tracked in (first, second):
        tracked.state = {"containerStatuses": [{"state": {"running": {}}}]}
        agent._publish(tracked)
    agent._unpublish(first)
    assert (endpoints / "127.0.0.1").exists()
    agent._unpublish(second)
    assert not (endpoints / "127.0.0.1").exists()


def test_a_pod_starts_on_a_supervisor_forked_ahead_its_runtime_in_memory_its_empty_dir_on_disk(
    kube_api: Any, test_namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A spare supervisor (forked by the zygote before the pod existed, its view's shared part
    built) runs the pod; the pod's runtime directory and token are in memory, not in the data
    directory; what it writes to an emptyDir is on disk and goes with the pod."""
    jobs = Jobs(kube_api, test_namespace)
    time.sleep(1.0)  # spares are forked again 0.2 s after the last pod start
    before = _since_boot()
    gate = tmp_path / "gate"  # (not in the data directory: no pod sees it)
    code = (
        f"{PROBE}\nopen('/scratch/out.txt', 'w').write('kept')\nimport time\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.02)"
    )
    scratch = {"volumes": [{"name": "scratch", "emptyDir": {}}]}
    mounts = {"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}
    jobs.create(job("PyTorchJob", "ahead", {"Master": replica(code, restart="Never", container=mounts, **scratch)}))
    wait_for(lambda: _output(jobs, "ahead-master-0"), 20, "the probe's output")
    pod = jobs.pod("ahead-master-0")
    directory = _pod_dir(control_plane, pod)
    supervisor = int((directory / "supervisor.pid").read_text())
    empty_dir = control_plane.home / "node" / "emptydir" / pod.metadata.uid / "scratch"
    try:
        assert json.loads(jobs.logs("ahead-master-0").splitlines()[0])["token"]
        assert _started_since_boot(supervisor) < before - 0.1  # forked ahead, not when the pod came
        runtime = directory.resolve()
        assert runtime.is_relative_to("/dev/shm") and not runtime.is_relative_to(control_plane.home.resolve())
        assert stat.S_IMODE(runtime.parent.stat().st_mode) == 0o700
        assert wait_for(lambda: (empty_dir / "out.txt").exists(), 10, "the emptyDir file")
        assert (empty_dir / "out.txt").read_text() == "kept"
    finally:
        gate.touch()
    jobs.wait("PyTorchJob", "ahead", "Succeeded")
    jobs.custom.delete_namespaced_custom_object("kubeflow.org", "v1", test_namespace, "pytorchjobs", "ahead")
    wait_for(lambda: not empty_dir.parent.exists() and not runtime.exists(), 20, "the pod's directories removed")
