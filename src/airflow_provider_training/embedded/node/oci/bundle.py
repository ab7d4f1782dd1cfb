"""A container's OCI bundle: ``config.json`` for ``runc`` from the container's resolved spec (argv,
environment, working directory, user and capabilities, volumes — projected service-account files
included — as bind mounts, GPUs as devices) and ``run.json`` for ``run.py`` (the image's layers,
the writable layer, runc's state directory).

What the config leaves out on purpose: ``process.rlimits`` and ``linux.resources`` (runc sets them
with ``CAP_SYS_RESOURCE`` and cgroup writes a sandboxed node may not have; the memory limit is not
enforced in image mode and the pod says so) and a network namespace (pods share the host's network
and listen on their loopback address, as process pods do).

The container spec then runs ``entry.py oci-run BUNDLE`` in place of its command: the supervisor
starts, stops, restarts and logs it like any container process.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded.node import isolation, privileges
from airflow_provider_training.embedded.node import safepaths as safe
from airflow_provider_training.embedded.node.oci.imageconfig import ImageConfig

ENTRY = Path(__file__).resolve().parent.parent / "entry.py"
RUNC_ENV = "AIRFLOW_TRAINING_RUNC"
RUN_FILE = "run.json"
MASKED = (
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
)
READ_ONLY = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
BASE_MOUNTS: list[dict[str, Any]] = [
    {"destination": "/proc", "type": "proc", "source": "proc"},
    {
        "destination": "/dev",
        "type": "tmpfs",
        "source": "tmpfs",
        "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
    },
    {
        "destination": "/dev/pts",
        "type": "devpts",
        "source": "devpts",
        "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"],
    },
    {
        "destination": "/dev/shm",
        "type": "tmpfs",
        "source": "shm",
        "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
    },
    {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
    {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
]


def runc_path() -> str | None:
    """``$AIRFLOW_TRAINING_RUNC`` (a path, or a name on PATH), else ``runc`` on PATH."""
    chosen = os.environ.get(RUNC_ENV, "").strip()
    if chosen:
        return chosen if os.path.isabs(chosen) and os.access(chosen, os.X_OK) else shutil.which(chosen)
    return shutil.which("runc") or next((p for p in ("/usr/sbin/runc", "/usr/bin/runc") if os.access(p, os.X_OK)), None)


def writable_dir(node_dir: Path, uid: str) -> Path:
    """Where a pod's writable layers go: on disk (what a container writes can be large)."""
    return node_dir / "oci" / "writable" / uid


def write(
    container: dict[str, Any],
    image: ImageConfig,
    pod: dict[str, Any],
    pod_dir: Path,
    node_dir: Path,
    runc: str,
) -> dict[str, Any]:
    """Write the bundle of ``container`` (a container of ``podspec.build``'s spec) under the pod's
    directory and return the container spec that runs it."""
    name, uid = str(container["name"]), str(pod["metadata"]["uid"])
    bundle = pod_dir / f"oci-{name}"
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / "rootfs").mkdir(exist_ok=True)
    writable = writable_dir(node_dir, uid) / name
    writable.mkdir(parents=True, exist_ok=True)
    identity = privileges.Identity.from_dict(container.get("identity"))
    hostname = (pod.get("spec") or {}).get("hostname") or pod["metadata"]["name"]
    env = dict(container.get("env") or {})
    env["HOSTNAME"] = hostname
    pod_ip = str(container.get("podIP") or "")
    _etc_files(bundle, hostname, pod_ip)
    mounts = [*BASE_MOUNTS, *_etc_mounts(bundle), *_volume_mounts(container)]
    devices = _gpu_devices(env.get("CUDA_VISIBLE_DEVICES", ""))
    caps = [f"CAP_{c}" for c in identity.capabilities]
    uid_, gid_ = identity.uid if identity.uid is not None else 0, identity.gid if identity.gid is not None else 0
    container_id = f"{uid}-{name}"
    config: dict[str, Any] = {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": uid_, "gid": gid_, "additionalGids": [g for g in identity.groups or () if g != gid_]},
            "args": list(container["argv"]),
            "env": [f"{k}={v}" for k, v in env.items()],
            "cwd": str(container.get("workdir") or "/"),
            "capabilities": {
                "bounding": caps,
                "effective": caps if uid_ == 0 else [],
                "permitted": caps if uid_ == 0 else [],
            },
            "noNewPrivileges": identity.no_new_privs,
        },
        "root": {"path": "rootfs", "readonly": False},
        "hostname": hostname,
        "mounts": mounts,
        "linux": {
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
            "cgroupsPath": f"/airflow-training/{container_id}",
            "maskedPaths": list(MASKED),
            "readonlyPaths": list(READ_ONLY),
            "devices": devices,
        },
    }
    (bundle / "config.json").write_text(json.dumps(config, indent=1))
    run = {
        "id": container_id,
        "runc": runc,
        "root": str(node_dir / "oci" / "runc"),
        "layers": [str(p) for p in image.image.layer_dirs],
        "upper": str(writable / "upper"),
        "work": str(writable / "work"),
        "rootfs": str(bundle / "rootfs"),
        "pidFile": str(bundle / "runc.pid"),
    }
    (bundle / RUN_FILE).write_text(json.dumps(run))
    out = dict(container)
    out.update(
        argv=[sys.executable, "-I", "-S", str(ENTRY), "oci-run", str(bundle)],
        workdir=None,  # the container's working directory is in its config; the runner's is none
        mounts=[],  # in the config too
        identity={},  # runc runs as the node's root; the container's process as config.json says
        memoryLimit=None,
        imageID=image.image.image_id,
        oci={
            "bundle": str(bundle),
            "id": container_id,
            "workdir": container.get("workdir"),
            "identity": container.get("identity"),
        },
    )
    return out


def _etc_files(bundle: Path, hostname: str, pod_ip: str) -> None:
    """The kubelet-managed ``/etc/hosts`` and ``/etc/hostname`` of the pod."""
    hosts = "# Kubernetes-managed hosts file (embedded node).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    if pod_ip:
        hosts += f"{pod_ip}\t{hostname}\n"
    (bundle / "hosts").write_text(hosts)
    (bundle / "hostname").write_text(hostname + "\n")


def _etc_mounts(bundle: Path) -> list[dict[str, Any]]:
    out = [
        {
            "destination": "/etc/hosts",
            "type": "bind",
            "source": str(bundle / "hosts"),
            "options": ["rbind", "rprivate"],
        },
        {
            "destination": "/etc/hostname",
            "type": "bind",
            "source": str(bundle / "hostname"),
            "options": ["rbind", "rprivate"],
        },
    ]
    if os.path.isfile("/etc/resolv.conf"):
        out.append(
            {
                "destination": "/etc/resolv.conf",
                "type": "bind",
                "source": "/etc/resolv.conf",
                "options": ["rbind", "ro", "rprivate"],
            }
        )
    return out


def _volume_mounts(container: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for data in container.get("mounts") or []:
        mount = isolation.Mount.from_dict(data)
        source = Path(mount.source)
        if mount.sub_path:
            source = safe.inside(source, mount.sub_path, "subPath")
            if not source.exists():
                source.mkdir(parents=True)
        options = ["rbind", "rprivate"] + (["ro"] if mount.read_only else [])
        out.append({"destination": mount.target, "type": "bind", "source": str(source), "options": options})
    return out


def _gpu_devices(visible: str) -> list[dict[str, Any]]:
    """``/dev/nvidiaN`` of each visible GPU and the driver's control devices, as the NVIDIA container
    toolkit adds them (runc allows each device it is given in the device cgroup)."""
    indices = [v.strip() for v in visible.split(",") if v.strip().isdigit()]
    if not indices:
        return []
    paths = [f"/dev/nvidia{i}" for i in indices] + ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    devices = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode):
            devices.append(
                {
                    "path": path,
                    "type": "c",
                    "major": os.major(st.st_rdev),
                    "minor": os.minor(st.st_rdev),
                    "fileMode": 0o666,
                    "uid": 0,
                    "gid": 0,
                }
            )
    return devices
