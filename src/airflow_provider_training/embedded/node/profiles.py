"""Image -> local environment: how a container's ``image`` becomes an interpreter, ``PATH``,
environment and working directory on this machine (no container engine is involved).

Configuration: ``$AIRFLOW_TRAINING_IMAGES`` or ``<home>/images.yaml``::

    images:
      - match: "pytorch/pytorch:*"        # fnmatch pattern on the image reference
        python: /opt/venvs/torch/bin/python  # its directory goes first on PATH
        path: [/opt/tools/bin]            # more directories, after that
        workingDir: /srv/training         # when neither the container nor the job says
        env: {OMP_NUM_THREADS: "1"}       # the image's ENV; the container's env wins

The first matching entry applies; without one, the default profile: the Python that runs the
control plane first on PATH, no extra environment. The working directory of a container is, in
order: its ``workingDir``; the job's annotation ``training.airflow.apache.org/working-dir`` (the
Airflow operators set it to the DAG file's folder); the image entry's ``workingDir``; the daemon's
default (``$AIRFLOW_TRAINING_WORKDIR``, else the directory ``embedded start`` ran in).

Built-in profiles come after the user's entries (theirs win). KitOps' CLI images
(``ghcr.io/kitops-ml/kitops``, and ``ghcr.io/kitops-ml/kit`` that the seed's ``package-job.yaml``
names) get a ``kit`` that is this provider's ``airflow-training kit`` and a ``kubectl`` (the one next
to the daemon's Python, else the first on its PATH), so that Job's ``kubectl wait …; kit login …;
kit pack …; kit push …`` runs unchanged on the embedded control plane.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from airflow_provider_training.specs.annotations import WORKING_DIR_ANNOTATION
from airflow_provider_training.specs.unstructured import Unstructured

IMAGES_ENV = "AIRFLOW_TRAINING_IMAGES"
WORKDIR_ENV = "AIRFLOW_TRAINING_WORKDIR"
# What a container inherits from the daemon's environment (like an image's ENV): nothing secret.
INHERITED = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SHELL")
KIT_IMAGES = ("ghcr.io/kitops-ml/kitops", "ghcr.io/kitops-ml/kit")


class ImageConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Profile:
    match: str = "*"
    python: str | None = None
    path: tuple[str, ...] = ()
    working_dir: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def environment(self, base_path: str) -> dict[str, str]:
        out = {k: os.environ[k] for k in INHERITED if k in os.environ}
        dirs = [str(Path(self.python).parent)] if self.python else [str(Path(sys.executable).parent)]
        dirs += list(self.path)
        out["PATH"] = os.pathsep.join([*dirs, base_path])
        out.update(self.env)
        return out


def load_profiles(path: Path) -> list[Profile]:
    if not path.exists():
        return []
    try:
        data: Any = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ImageConfigError(f"{path}: not valid YAML: {exc}") from None
    entries = data.get("images") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ImageConfigError(f"{path}: expected a mapping with a list under 'images'")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("match"), str):
            raise ImageConfigError(f"{path}: images[{i}] needs a string 'match' (an fnmatch pattern)")
        env = entry.get("env") or {}
        if not isinstance(env, dict):
            raise ImageConfigError(f"{path}: images[{i}].env must be a mapping of names to strings")
        out.append(
            Profile(
                match=entry["match"],
                python=entry.get("python"),
                path=tuple(str(p) for p in entry.get("path") or []),
                working_dir=entry.get("workingDir"),
                env={str(k): str(v) for k, v in env.items()},
            )
        )
    return out


@dataclass
class Runtime:
    profiles: list[Profile]
    default_workdir: str
    base_path: str

    @classmethod
    def from_settings(cls, home_root: Path, default_workdir: str | None = None) -> Runtime:
        config = Path(os.environ.get(IMAGES_ENV) or home_root / "images.yaml")
        workdir = os.environ.get(WORKDIR_ENV) or default_workdir or os.getcwd()
        profiles = with_builtins(load_profiles(config), home_root)
        return cls(profiles, workdir, os.environ.get("PATH", os.defpath))

    def profile(self, image: str | None) -> Profile:
        for p in self.profiles:
            if fnmatch.fnmatchcase(image or "", p.match):
                return p
        return Profile()

    def working_dir(self, container: dict[str, Any], pod: Unstructured) -> str:
        if container.get("workingDir"):
            return str(container["workingDir"])
        annotations = pod.get("metadata", {}).get("annotations") or {}
        if annotations.get(WORKING_DIR_ANNOTATION):
            return str(annotations[WORKING_DIR_ANNOTATION])
        return self.profile(container.get("image")).working_dir or self.default_workdir


# -- built-in profiles ------------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.chmod(0o755)
    os.replace(tmp, path)


def with_builtins(profiles: list[Profile], home_root: Path) -> list[Profile]:
    """``profiles`` (the user's) then the built-in ones. A user's entry that matches a KitOps image
    (to give it registry settings in ``env``, say) keeps that image's ``kit`` and ``kubectl`` on PATH."""
    builtins = builtin_profiles(home_root)
    bin_dir = builtins[0].path[0]
    samples = [f"{image}:latest" for image in KIT_IMAGES]
    out = [
        dataclasses.replace(p, path=(*p.path, bin_dir))
        if any(fnmatch.fnmatchcase(s, p.match) for s in samples) and bin_dir not in p.path
        else p
        for p in profiles
    ]
    return out + builtins


def builtin_profiles(home_root: Path) -> list[Profile]:
    bin_dir = home_root / "node" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    _write(
        bin_dir / "kit", f'#!/bin/sh\nexec "{sys.executable}" -m airflow_provider_training.embedded.node.kitshim "$@"\n'
    )
    kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
    if kubectl:
        _write(bin_dir / "kubectl", f'#!/bin/sh\nexec "{kubectl}" "$@"\n')
    return [
        Profile(match=pattern, path=(str(bin_dir),))
        for image in KIT_IMAGES
        for pattern in (image, f"{image}:*", f"{image}@*")
    ]
