"""Built-in image mappings, after the user's ``images.yaml`` entries (theirs win).

KitOps' CLI images (``ghcr.io/kitops-ml/kitops``, and ``ghcr.io/kitops-ml/kit`` that the seed's
``package-job.yaml`` names) get a ``kit`` that is this provider's ``airflow-training kit`` and a
``kubectl`` (the one next to the daemon's Python, else the first on its PATH), so that Job's
``kubectl wait …; kit login …; kit pack …; kit push …`` runs unchanged on the embedded control plane.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import shutil
import sys
from pathlib import Path

from airflow_provider_training.embedded.node.profiles import Profile

KIT_IMAGES = ("ghcr.io/kitops-ml/kitops", "ghcr.io/kitops-ml/kit")


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
