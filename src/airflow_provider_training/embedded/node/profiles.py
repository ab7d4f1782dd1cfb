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
"""

from __future__ import annotations

import fnmatch
import os
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
        from airflow_provider_training.embedded.node.images import with_builtins  # it imports Profile

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
