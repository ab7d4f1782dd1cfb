"""Image mode of the embedded node, side by side in one run (not part of the test suite):

    python tools/images.py build training            # once: the training image in buildah's storage
    PYTHONPATH=src python benchmarks/images.py [--runs 5] [--pods 4]

1. Cold pull + unpack of the training image into the node's store (``oci/imagestore.py``) against
   ``skopeo copy`` of the same image to a directory followed by ``tar -x`` of its layers in order
   (where skopeo is missing: a plain HTTP fetch of each blob and ``tar -x``). Goal: <= 1.2x.
2. Warm pod start (the image present): a pod running ``true`` from create to Succeeded in image mode,
   the same pod in process mode on the same daemon, and a bare ``runc run`` of a bundle of the same
   image (overlay mounted once, outside the timing). Goal: image mode <= 1.3x bare runc — the pod's
   figure includes the API server, the node agent and the supervisor, which a bare runc has not.
3. Disk used by N running pods of the image: the store's layers and each pod's writable layer.
   Goal: one copy of the layers.

A registry (Debian's docker-registry) is started on a free loopback port and the image pushed there
(gzip, as TCR serves it); everything is stopped and removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from airflow_provider_training.embedded import start, stop
from airflow_provider_training.embedded.node.oci import bundle, imagestore, references, run
from airflow_provider_training.embedded.node.oci.imageconfig import ImageConfig

IMAGE = "ccr.ccs.tencentyun.com/ml-models/digits-train:latest"
REPOSITORY = "ml-models/digits-train"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def registry(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    config = directory / "config.yml"
    config.write_text(
        "version: 0.1\nlog: {level: warn, accesslog: {disabled: true}}\n"
        f"storage: {{filesystem: {{rootdirectory: {directory / 'storage'}}}}}\nhttp: {{addr: 127.0.0.1:{port}}}\n"
    )
    proc = subprocess.Popen(
        ["/usr/bin/docker-registry", "serve", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    for _ in range(100):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            break
        time.sleep(0.1)
    return proc, f"127.0.0.1:{port}"


DROP_CACHES = False  # --drop-caches: it slows down everything else on the machine


def drop_caches() -> None:
    """Cold means not in the page cache either (``--drop-caches``, root only); without it both sides
    read the registry's blobs from the page cache alike."""
    if not DROP_CACHES:
        return
    with contextlib.suppress(OSError):
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")


def baseline(host: str, work: Path) -> float:
    """skopeo copy + tar -x of every layer, or an HTTP fetch + tar -x where skopeo is missing."""
    drop_caches()
    began = time.perf_counter()
    target = work / "rootfs"
    target.mkdir()
    if shutil.which("skopeo"):
        subprocess.run(
            [
                "skopeo",
                "copy",
                "-q",
                "--src-tls-verify=false",
                f"docker://{host}/{REPOSITORY}:latest",
                f"dir:{work / 'dir'}",
            ],
            check=True,
        )
        manifest = json.loads((work / "dir" / "manifest.json").read_text())
        blobs = [work / "dir" / layer["digest"].split(":")[1] for layer in manifest["layers"]]
    else:
        accept = {"Accept": imagestore.ACCEPT}
        request = urllib.request.Request(f"http://{host}/v2/{REPOSITORY}/manifests/latest", headers=accept)
        manifest = json.load(urllib.request.urlopen(request))
        blobs = []
        for layer in manifest["layers"]:
            path = work / layer["digest"].split(":")[1]
            with (
                urllib.request.urlopen(f"http://{host}/v2/{REPOSITORY}/blobs/{layer['digest']}") as resp,
                open(path, "wb") as out,
            ):
                shutil.copyfileobj(resp, out, 1 << 20)
            blobs.append(path)
    for blob in blobs:
        subprocess.run(["tar", "-x", "--numeric-owner", "-f", str(blob), "-C", str(target)], check=True)
    return time.perf_counter() - began


def ours(host: str, work: Path) -> tuple[float, imagestore.Image]:
    drop_caches()
    began = time.perf_counter()
    source = references.resolve(f"{host}/{REPOSITORY}:latest", [])
    result = imagestore.ImageStore(work / "node" / "oci").pull(source, None)
    return time.perf_counter() - began, result.image


def bare_runc(image: imagestore.Image, host: str, work: Path, runs: int) -> list[float]:
    """``runc run`` of a bundle of the image running ``true``, its rootfs mounted once."""
    pod = {"metadata": {"uid": "bench", "name": "bench", "namespace": "bench"}, "spec": {}}
    config = ImageConfig(image, references.resolve(f"{host}/{REPOSITORY}:latest", []))
    container = {
        "name": "bare",
        "argv": ["true"],
        "env": config.environment(),
        "workdir": "/",
        "mounts": [],
        "identity": {},
    }
    spec = bundle.write(container, config, pod, work / "pod", work / "node", bundle.runc_path() or "runc")
    directory = Path(spec["oci"]["bundle"])
    settings = json.loads((directory / "run.json").read_text())
    run.fresh(settings["upper"])
    run.fresh(settings["work"])
    libc = run._libc()
    times = []
    pid = os.fork()
    if pid == 0:  # a child with a mount namespace of its own: the overlay goes with it
        libc.unshare(0x00020000)
        run._mount(libc, None, "/", None, (1 << 14) | (1 << 18))
        run.mount_rootfs(libc, settings)
        for _ in range(runs):
            began = time.perf_counter()
            subprocess.run(
                [settings["runc"], "--root", settings["root"], "run", "--bundle", str(directory), "bare"], check=True
            )
            times.append(time.perf_counter() - began)
        (work / "bare.json").write_text(json.dumps(times))
        os._exit(0)
    os.waitpid(pid, 0)
    return json.loads((work / "bare.json").read_text())


def pod_starts(plane: object, host: str, runtime: str, runs: int) -> list[float]:
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)  # type: ignore[attr-defined]
    api = client.CoreV1Api(client.ApiClient(configuration))
    times = []
    for i in range(runs + 1):  # the first start of each kind warms up (and pulls): not counted
        name = f"{runtime}-{i}"
        body = {
            "metadata": {"name": name, "annotations": {"training.airflow.apache.org/runtime": runtime}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": f"{host}/{REPOSITORY}:latest",
                        "command": ["true"],
                        "imagePullPolicy": "IfNotPresent",
                    }
                ],
            },
        }
        began = time.perf_counter()
        api.create_namespaced_pod("default", body)
        while api.read_namespaced_pod(name, "default").status.phase not in ("Succeeded", "Failed"):
            time.sleep(0.01)
        if i:
            times.append(time.perf_counter() - began)
        api.delete_namespaced_pod(name, "default")
    return times


def disk(plane: object, host: str, pods: int) -> tuple[int, list[int]]:
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)  # type: ignore[attr-defined]
    api = client.CoreV1Api(client.ApiClient(configuration))
    names = [f"disk-{i}" for i in range(pods)]
    for name in names:
        api.create_namespaced_pod(
            "default",
            {
                "metadata": {"name": name, "annotations": {"training.airflow.apache.org/runtime": "oci"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "main",
                            "image": f"{host}/{REPOSITORY}:latest",
                            "command": ["sleep", "120"],
                            "imagePullPolicy": "IfNotPresent",
                        }
                    ],
                },
            },
        )
    while any(api.read_namespaced_pod(n, "default").status.phase != "Running" for n in names):
        time.sleep(0.2)
    home = Path(plane.home)  # type: ignore[attr-defined]
    layers = du(home / "node" / "oci" / "layers")
    writable = [du(p) for p in sorted((home / "node" / "oci" / "writable").iterdir())]
    for name in names:
        api.delete_namespaced_pod(name, "default")
    return layers, writable


def du(path: Path) -> int:
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pods", type=int, default=4)
    parser.add_argument("--drop-caches", action="store_true", help="empty the page cache before each cold pull")
    args = parser.parse_args()
    global DROP_CACHES
    DROP_CACHES = args.drop_caches
    if os.geteuid() != 0 or bundle.runc_path() is None:
        sys.exit("benchmarks/images.py needs root and runc (tools/setup.sh installs runc)")
    with tempfile.TemporaryDirectory(prefix="bench-images-") as tmp:
        work = Path(tmp)
        (work / "registry").mkdir()
        proc, host = registry(work / "registry")
        plane_home = work / "ours"  # the daemon's store is the one the cold pull filled
        try:
            subprocess.run(
                ["buildah", "push", "-q", "--tls-verify=false", IMAGE, f"docker://{host}/{REPOSITORY}:latest"],
                check=True,
            )
            (work / "base").mkdir()
            theirs = baseline(host, work / "base")
            mine, image = ours(host, work / "ours")
            shutil.rmtree(work / "base", ignore_errors=True)
            print(f"cold pull + unpack of {IMAGE} ({image.size / 2**20:.0f} MiB compressed):")
            tool = "skopeo copy + tar -x" if shutil.which("skopeo") else "HTTP fetch + tar -x"
            print(f"  node's store {mine:.1f} s   {tool} {theirs:.1f} s   ratio {mine / theirs:.2f} (goal <= 1.2)")
            bare = bare_runc(image, host, work / "ours", args.runs)
            plane = start(plane_home, env={"AIRFLOW_TRAINING_RUNTIME": "oci"})
            image_mode = pod_starts(plane, host, "oci", args.runs)
            process_mode = pod_starts(plane, host, "process", args.runs)
            median = statistics.median
            print(f"warm pod start, {args.runs} runs each (median):")
            print(
                f"  image mode {median(image_mode):.2f} s   process mode {median(process_mode):.2f} s   bare runc run {median(bare):.2f} s"
                f"   image/bare {median(image_mode) / median(bare):.2f} (goal <= 1.3)"
            )
            layers, writable = disk(plane, host, args.pods)
            print(f"disk with {args.pods} pods of the image running:")
            print(
                f"  layers {layers / 2**20:.0f} MiB (one copy)   writable layers {', '.join(f'{w / 2**10:.0f} KiB' for w in writable)}"
            )
        finally:
            with contextlib.suppress(Exception):
                stop(plane_home, replicas=True)
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
