#!/usr/bin/env python3
"""Build the images of images/ (the ones the DAGs and docs name), tag them as the DAGs expect, and
push them with their digests recorded — daemonless, with buildah, where Docker's daemon is absent.

    python tools/images.py build                                   # training, packaging, predictor
    python tools/images.py build --push 127.0.0.1:5050 --table "$AIRFLOW_TRAINING_HOME/image-table.yaml"
    python tools/images.py build all --push ccr.ccs.tencentyun.com --tag v1   # after `buildah login`
    python tools/images.py list                                    # the images, their Containerfiles

Each image is tagged ``ccr.ccs.tencentyun.com/ml-models/<name>:<tag>`` and ``:latest`` (the names in
dags/), and with ``--push REGISTRY`` also ``REGISTRY/ml-models/<name>:<tag>``, pushed there; the
digests go to ``images/built.json`` (git-ignored), and ``--table FILE`` writes the embedded node's
image table (``[training] embedded_runtime = oci``): the DAGs' names mapped to the pushed digests.

The base (``BASE_IMAGE``) is the public one the Containerfiles name (``python:3.11-slim-bookworm``)
where it can be pulled; where it cannot (no route to Docker Hub), one made by ``mmdebstrap`` from
Debian's packages (bookworm: the same Python 3.11), built once and kept as
``localhost/airflow-training/debian-python:bookworm``. Layers are cached (``--layers``): a rebuild
with no change takes seconds, and so does a push of layers the registry has. A local wheel directory
(``$PIP_FIND_LINKS``, e.g. /opt/wheels with the CPU torch wheel) and pip's CA bundle (``$PIP_CERT``)
are mounted into the build read-only and handed to pip.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "ml-models"
DAG_REGISTRY = "ccr.ccs.tencentyun.com"
PUBLIC_BASE = "docker.io/library/python:3.11-slim-bookworm"
DEBIAN_BASE = "localhost/airflow-training/debian-python:bookworm"
BUILT = ROOT / "images" / "built.json"
# One build at a time per checkout: a second one (tools/test.sh warms the layer cache in the
# background while the suite starts; the image fixture then builds too) waits, then finds every
# layer cached, and neither overwrites built.json with the other's half.
BUILD_LOCK = ROOT / "images" / ".build.lock"
MMDEBSTRAP_PACKAGES = "python3,python3-venv,ca-certificates"


@dataclass(frozen=True)
class Spec:
    key: str  # what the command line calls it
    name: str  # the repository name under ml-models/
    directory: str  # under images/
    base: str | None = None  # another image of this table to build FROM (shares its layers)
    python_base: bool = True  # FROM the Python base (public, or made from Debian's packages)
    matches: tuple[str, ...] = ()  # names pods use that the node's image table maps to this image


IMAGES = (
    Spec("training", "digits-train", "training", matches=(f"{DAG_REGISTRY}/{NAMESPACE}/digits-train:*",)),
    Spec(
        "packaging",
        "digits-kit",
        "packaging",
        matches=("ghcr.io/kitops-ml/kitops:*", "ghcr.io/kitops-ml/kit:*", f"{DAG_REGISTRY}/{NAMESPACE}/digits-kit:*"),
    ),
    Spec(
        "predictor",
        "digits-predictor",
        "predictor",
        base="training",
        matches=(
            "docker.io/airflow-provider-training/torchscript-runtime:*",
            "ghcr.io/kitops-ml/kitops-kserve:*",
            f"{DAG_REGISTRY}/{NAMESPACE}/digits-predictor:*",
        ),
    ),
    Spec(
        "training-kit",
        "digits-train-kit",
        "packaging",
        base="training",
        matches=(f"{DAG_REGISTRY}/{NAMESPACE}/digits-train-kit:*",),
    ),
    Spec("mpi", "digits-mpi", "mpi", matches=(f"{DAG_REGISTRY}/{NAMESPACE}/digits-mpi:*",)),
    Spec("xgboost", "digits-xgboost", "xgboost", matches=(f"{DAG_REGISTRY}/{NAMESPACE}/digits-xgboost:*",)),
    Spec("training-gpu", "digits-train-gpu", "training-gpu", python_base=False),
    Spec("airflow", "airflow-training", "airflow", python_base=False),
)
BY_KEY = {spec.key: spec for spec in IMAGES}
DEFAULT = ("training", "packaging", "predictor")


def log(message: str) -> None:
    print(f"images: {message}", flush=True)


def run(argv: list[str], quiet: bool = True) -> str:
    """Run a tool; its output only when it fails (or ``quiet=False``)."""
    proc = subprocess.run(argv, capture_output=quiet, text=True)
    if proc.returncode != 0:
        if quiet:
            sys.stderr.write((proc.stdout or "")[-6000:] + (proc.stderr or "")[-6000:])
        raise SystemExit(f"images: failed ({proc.returncode}): {' '.join(argv[:6])} …")
    return proc.stdout or ""


class Engine:
    """buildah, or docker where its daemon answers."""

    def __init__(self) -> None:
        docker = shutil.which("docker")
        if docker and subprocess.run([docker, "info"], capture_output=True).returncode == 0:
            self.tool = docker
        elif shutil.which("buildah"):
            self.tool = "buildah"
        else:
            raise SystemExit("images: neither a Docker daemon nor buildah here (Debian: apt-get install buildah)")
        self.docker = self.tool != "buildah"

    def exists(self, image: str) -> bool:
        argv = (
            [self.tool, "image", "inspect", image] if self.docker else ["buildah", "inspect", "--type", "image", image]
        )
        return subprocess.run(argv, capture_output=True).returncode == 0

    def pullable(self, image: str) -> bool:
        if self.exists(image):
            return True
        argv = [self.tool, "pull", "-q", image]
        try:
            return subprocess.run(argv, capture_output=True, timeout=120).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def build(self, spec: Spec, tags: list[str], args: dict[str, str], mounts: list[str]) -> None:
        argv = [self.tool, "build", "-f", str(ROOT / "images" / spec.directory / "Containerfile")]
        if not self.docker:
            argv += ["--layers", "--isolation", "chroot"]
        for key, value in args.items():
            argv += ["--build-arg", f"{key}={value}"]
        for mount in [] if self.docker else mounts:  # (docker build mounts nothing: pip downloads)
            argv += ["-v", mount]
        for tag in tags:
            argv += ["-t", tag]
        run([*argv, str(ROOT)])

    def push(self, image: str, destination: str, plain_http: bool, compression: str) -> str:
        if self.docker:
            run([self.tool, "tag", image, destination])
            out = run([self.tool, "push", destination])
            digest = next((w for line in out.splitlines() for w in line.split() if w.startswith("sha256:")), "")
            return digest
        with tempfile.NamedTemporaryFile("r", suffix=".digest") as handle:
            argv = ["buildah", "push", "-q", "--digestfile", handle.name]
            if plain_http:
                argv.append("--tls-verify=false")
            if compression == "none":
                argv.append("--disable-compression")
            else:
                argv += ["--compression-format", compression]
            run([*argv, image, f"docker://{destination}"])
            return handle.read().strip()


def debian_base(engine: Engine) -> str:
    """A Python base made from Debian's packages (bookworm: Python 3.11, as python:3.11-slim)."""
    if engine.exists(DEBIAN_BASE):
        return DEBIAN_BASE
    if not shutil.which("mmdebstrap"):
        raise SystemExit(
            f"images: {PUBLIC_BASE} cannot be pulled and mmdebstrap is missing (apt-get install mmdebstrap)"
        )
    log("the public base cannot be pulled: making one from Debian's packages with mmdebstrap (about 90 s)")
    with tempfile.TemporaryDirectory(prefix="images-base-") as tmp:
        tarball = Path(tmp) / "base.tar"
        run(
            [
                "mmdebstrap",
                "--variant=minbase",
                f"--include={MMDEBSTRAP_PACKAGES}",
                "--skip=output/dev",
                "--dpkgopt=path-exclude=/usr/share/man/*",
                "--dpkgopt=path-exclude=/usr/share/doc/*",
                "--dpkgopt=path-include=/usr/share/doc/*/copyright",
                "bookworm",
                str(tarball),
                # the point release, its updates and the security archive (a base with the security fixes)
                "deb http://deb.debian.org/debian bookworm main",
                "deb http://deb.debian.org/debian bookworm-updates main",
                "deb http://deb.debian.org/debian-security bookworm-security main",
            ]
        )
        if engine.docker:
            run(["docker", "import", "-c", 'CMD ["python3"]', str(tarball), DEBIAN_BASE])
            return DEBIAN_BASE
        container = run(["buildah", "from", "scratch"]).strip()
        try:
            run(["buildah", "add", container, str(tarball), "/"])
            run(
                [
                    "buildah", "config",
                    "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "--env", "LANG=C.UTF-8",
                    "--cmd", '["python3"]',
                    "--label", "org.opencontainers.image.description=Debian bookworm minbase + python3 (mmdebstrap)",
                    container,
                ]
            )  # fmt: skip
            run(["buildah", "commit", "-q", "--rm", container, DEBIAN_BASE])
        except SystemExit:
            subprocess.run(["buildah", "rm", container], capture_output=True)
            raise
    return DEBIAN_BASE


def revision() -> str:
    proc = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    rev = proc.stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", "images", "src", "dags/code"])
    return rev + ("-dirty" if dirty.returncode == 1 else "")


def pip_settings(docker: bool) -> tuple[dict[str, str], list[str]]:
    """This machine's local wheels and CA bundle for pip, as build arguments and read-only mounts
    (buildah only: ``docker build`` cannot mount them, and pip then downloads as usual)."""
    if docker:
        return {}, []
    args: dict[str, str] = {}
    mounts: list[str] = []
    links = os.environ.get("PIP_FIND_LINKS", "")
    if links and Path(links).is_dir():
        args["PIP_FIND_LINKS"] = links
        mounts.append(f"{links}:{links}:ro")
        if any(Path(links).glob("torch-*+cpu-*.whl")):
            args["TORCH_INDEX"] = ""  # the CPU wheel is here: no PyTorch index needed
    cert = os.environ.get("PIP_CERT", "")
    if cert and Path(cert).is_file():
        args["PIP_CERT"] = cert
        mounts.append(f"{cert}:{cert}:ro")
    return args, mounts


def order(keys: list[str]) -> list[Spec]:
    """``keys`` with the images they are built FROM first."""
    out: list[Spec] = []

    def add(key: str) -> None:
        spec = BY_KEY[key]
        if spec.base:
            add(spec.base)
        if spec not in out:
            out.append(spec)

    for key in keys:
        add(key)
    return out


def build(ns: argparse.Namespace) -> int:
    with _one_build_at_a_time():
        return _build(ns)


@contextlib.contextmanager
def _one_build_at_a_time() -> Iterator[None]:
    with BUILD_LOCK.open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("waiting for another build of this checkout to finish")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build(ns: argparse.Namespace) -> int:
    keys = [spec.key for spec in IMAGES] if ns.images == ["all"] else (ns.images or list(DEFAULT))
    unknown = [k for k in keys if k not in BY_KEY]
    if unknown:
        raise SystemExit(f"images: unknown image(s) {unknown}; choose from {[s.key for s in IMAGES]} or 'all'")
    engine = Engine()
    log(f"building with {Path(engine.tool).name}: {', '.join(keys)}")
    args, mounts = pip_settings(engine.docker)
    args["REVISION"] = revision()
    python_base = None
    built: dict[str, dict[str, str]] = json.loads(BUILT.read_text()) if BUILT.exists() else {}
    local: dict[str, str] = {}
    for spec in order(keys):
        image_args = dict(args)
        if spec.base:
            image_args["BASE_IMAGE"] = local[spec.base]
        elif spec.python_base:
            if python_base is None:
                python_base = PUBLIC_BASE if engine.pullable(PUBLIC_BASE) else debian_base(engine)
            image_args["BASE_IMAGE"] = python_base
        tags = [f"{DAG_REGISTRY}/{NAMESPACE}/{spec.name}:{ns.tag}", f"{DAG_REGISTRY}/{NAMESPACE}/{spec.name}:latest"]
        started = time.monotonic()
        engine.build(spec, list(dict.fromkeys(tags)), image_args, mounts)
        local[spec.key] = tags[0]
        log(f"built {tags[0]} in {time.monotonic() - started:.1f}s")
        entry = {"image": tags[0], "revision": args["REVISION"]}
        if ns.push:
            for tag in dict.fromkeys([ns.tag, "latest"]):
                destination = f"{ns.push}/{NAMESPACE}/{spec.name}:{tag}"
                started = time.monotonic()
                digest = engine.push(tags[0], destination, ns.plain_http or _loopback(ns.push), ns.compression)
                log(f"pushed {destination} {digest} in {time.monotonic() - started:.1f}s")
            entry.update(pushed=f"{ns.push}/{NAMESPACE}/{spec.name}", digest=digest)
        built[spec.key] = entry
    BUILT.write_text(json.dumps(built, indent=2) + "\n")
    log(f"digests recorded in {BUILT.relative_to(ROOT)}")
    if ns.table:
        write_table(Path(ns.table), built)
    return 0


def write_table(path: Path, built: dict[str, dict[str, str]]) -> None:
    """The node's image table: each name pods use, mapped to the pushed image at its digest."""
    lines = [
        "# The embedded node's image table (written by tools/images.py): the names DAGs and the seed's YAMLs use,",
        "# mapped to the images built from images/ and pushed, pinned by digest. See docs/embedded.md.",
        "images:",
    ]
    for spec in IMAGES:
        entry = built.get(spec.key) or {}
        if not entry.get("digest"):
            continue
        for pattern in spec.matches:
            lines += [f'  - match: "{pattern}"', f'    pull: "{entry["pushed"]}@{entry["digest"]}"']
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    log(f"image table written to {path}")


def _loopback(registry: str) -> bool:
    host = registry.rsplit(":", 1)[0]
    return host in ("localhost", "::1") or host.startswith("127.")


def list_images(_ns: argparse.Namespace) -> int:
    for spec in IMAGES:
        base = (
            f"FROM {spec.base}" if spec.base else ("FROM the Python base" if spec.python_base else "FROM its own base")
        )
        default = " (default)" if spec.key in DEFAULT else ""
        print(
            f"{spec.key:14} {DAG_REGISTRY}/{NAMESPACE}/{spec.name:18} images/{spec.directory}/Containerfile  {base}{default}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/images.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build (and push) images")
    b.add_argument(
        "images", nargs="*", help=f"{', '.join(s.key for s in IMAGES)}, or all (default: {', '.join(DEFAULT)})"
    )
    b.add_argument("--push", metavar="REGISTRY", help="push to REGISTRY/ml-models/<name>:<tag> and :latest")
    b.add_argument("--tag", default="latest", help="the version tag (default: latest)")
    b.add_argument("--plain-http", action="store_true", help="push over HTTP (default for 127.0.0.1 and localhost)")
    b.add_argument(
        "--compression", choices=("gzip", "zstd", "none"), default="gzip", help="layer compression of the push"
    )
    b.add_argument("--table", metavar="FILE", help="write the embedded node's image table (with --push)")
    b.set_defaults(func=build)
    sub.add_parser("list", help="the images and their Containerfiles").set_defaults(func=list_images)
    ns = parser.parse_args(argv)
    if getattr(ns, "table", None) and not ns.push:
        parser.error("--table needs --push: the table maps to the pushed digests")
    return int(ns.func(ns))


if __name__ == "__main__":
    sys.exit(main())
