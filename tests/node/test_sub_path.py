"""The subPath race (issue 25 item 7): an init container that replaces a subPath directory with a
symlink (absolute or relative) must not make a later container write host files. The node opens
each subPath at each start, component by component without following links out of the volume, and
mounts what it opened; a path that leads out fails that container as kubelet does."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.embedded import ControlPlane
from airflow_provider_training.embedded.node import safepaths
from tests.node import sandbox_pods as pods
from tests.waiting import wait_for

WRITE = "open('/out/pwned', 'w').write('from the pod'); print('wrote')"


def _swapping_pod(api: Any, namespace: str, name: str, swap: str, sub_path: str = "sub") -> None:
    """An init container that sees the whole volume and turns ``sub`` into what ``swap`` makes;
    then the main container mounts ``sub_path`` of it at /out and writes there."""
    init = pods.container(swap)
    init["name"] = "swap"
    init["volumeMounts"] = [{"name": "data", "mountPath": "/vol"}]
    main = pods.container(WRITE)
    main["volumeMounts"] = [{"name": "data", "mountPath": "/out", "subPath": sub_path}]
    pods.create(
        api,
        namespace,
        name,
        initContainers=[init],
        containers=[main],
        volumes=[{"name": "data", "emptyDir": {}}],
    )


def _volume(plane: ControlPlane, api: Any, namespace: str, name: str) -> Path:
    uid = pods.read(api, namespace, name).metadata.uid
    return plane.home / "node" / "emptydir" / uid / "data"


@pytest.mark.parametrize("kind", ["absolute", "relative"])
def test_a_sub_path_an_init_container_turned_into_a_link_out_fails_the_container(
    kind: str, kube_api: Any, test_namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    target = tmp_path / "host-dir"  # a host directory the pod must never write
    target.mkdir()
    name = f"swap-{kind}"
    # the relative link needs the volume's place on the host: the pod is created first, held by
    # its init container until the link's text is there
    gate = tmp_path / "link-text"
    swap = (
        "import os, time\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.02)\n"
        "os.makedirs('/vol/sub', exist_ok=True); os.rmdir('/vol/sub')\n"
        f"os.symlink(open({str(gate)!r}).read(), '/vol/sub'); print('swapped')"
    )
    _swapping_pod(kube_api, test_namespace, name, swap)
    volume = wait_for(
        lambda: (
            _volume(control_plane, kube_api, test_namespace, name)
            if _volume(control_plane, kube_api, test_namespace, name).is_dir()
            else None
        ),
        20,
        "the pod's volume",
    )
    gate.write_text(str(target) if kind == "absolute" else os.path.relpath(target, volume))

    def outcome() -> Any:
        pod = pods.read(kube_api, test_namespace, name)
        statuses = pod.status.container_statuses or []
        state = statuses[0].state.waiting if statuses else None
        if state is not None and state.reason == "CreateContainerConfigError":
            return state
        return pod.status.phase in ("Succeeded", "Failed")  # (the container ran: the test fails below)

    state = wait_for(outcome, 30, "the main container's CreateContainerConfigError")
    assert list(target.iterdir()) == []  # nothing reached the host directory
    assert state is not True, pods.logs(kube_api, test_namespace, name, "main")
    assert state.message.startswith('failed to prepare subPath for volumeMount "data" of container "main"')
    assert "symbolic link" in state.message and str(target) not in state.message  # no host path told
    assert pods.read(kube_api, test_namespace, name).status.phase == "Pending"
    assert any(
        reason == "Failed" and message.startswith("Error: failed to prepare subPath")
        for _, reason, message in pods.events(kube_api, test_namespace, name)
    )
    assert os.path.islink(volume / "sub")  # the swap did happen


def test_a_sub_path_resolved_at_start_sees_what_the_init_containers_left(
    kube_api: Any, test_namespace: str, control_plane: ControlPlane
) -> None:
    """As kubelet: a link that stays inside the volume is followed, and a directory an init
    container replaced is the one the next container gets (not the one there at pod creation)."""
    swap = (
        "import os, shutil\nos.makedirs('/vol/real'); os.makedirs('/vol/sub', exist_ok=True)\n"
        "shutil.rmtree('/vol/sub'); os.symlink('real', '/vol/sub')\n"
        "os.makedirs('/vol/other/deeper')"
    )
    _swapping_pod(kube_api, test_namespace, "inside", swap)
    pods.wait_phase(kube_api, test_namespace, "inside", ("Succeeded", "Failed"))
    assert "wrote" in pods.logs(kube_api, test_namespace, "inside", "main")
    volume = _volume(control_plane, kube_api, test_namespace, "inside")
    assert (volume / "real" / "pwned").read_text() == "from the pod"


def test_open_beneath_refuses_every_way_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, outside = tmp_path / "volume", tmp_path / "outside"
    root.mkdir(mode=0o777)
    root.chmod(0o2777)
    outside.mkdir()
    (root / "abs").symlink_to(outside)
    (root / "rel").symlink_to("../outside")
    (root / "deep").mkdir()
    (root / "deep" / "up").symlink_to("../../outside")
    (root / "file").write_text("x")
    for escape in ("abs", "rel", "deep/up", "deep/up/new", "../outside", "/etc", "a\x00b", "deep/../../outside"):
        with pytest.raises(safepaths.PathEscape):
            os.close(safepaths.open_beneath(str(root), escape))
    assert list(outside.iterdir()) == []
    # oversized: a name longer than the file system takes is an OSError, not a crash or a cut
    with pytest.raises(OSError):
        os.close(safepaths.open_beneath(str(root), "x" * 300))
    # what may be: missing directories are made with the volume's mode (setgid kept), a file opens
    fd = safepaths.open_beneath(str(root), "new/dir")
    os.close(fd)
    assert stat.S_IMODE((root / "new" / "dir").stat().st_mode) == 0o2777
    os.close(safepaths.open_beneath(str(root), "file"))

    # the race itself: a component resolved as a directory that is a link by the time it is opened
    (root / "swapped").symlink_to(outside)
    real = os.path.realpath
    monkeypatch.setattr(safepaths.os.path, "realpath", lambda p: p if p.endswith("swapped") else real(p))
    with pytest.raises(safepaths.PathEscape, match="changed while it was opened"):
        os.close(safepaths.open_beneath(str(root), "swapped"))
