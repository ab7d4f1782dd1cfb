"""Generate a Kitfile from a model output directory when the user has none (kit's ``kit init`` rules,
as pinned by kit's ``kitfile-generation`` test cases): model files become the model and its parts,
datasets and docs are detected by extension, special directories (``src``, ``lib``...) and mixed
directories become code, and anything left at the root goes into a catch-all ``.`` code layer."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from airflow_provider_training.kitops.ignore import ALWAYS_IGNORED
from airflow_provider_training.specs.kitfile import (
    MANIFEST_VERSION,
    Code,
    Dataset,
    Docs,
    Kitfile,
    Model,
    ModelPart,
    Package,
)

MODEL_EXT = {
    ".gguf",
    ".safetensors",
    ".pkl",
    ".pb",
    ".npy",
    ".npz",
    ".bin",
    ".pt",
    ".pth",
    ".onnx",
    ".h5",
    ".hdf5",
    ".keras",
    ".joblib",
    ".ckpt",
    ".tflite",
    ".mlmodel",
    ".mar",
    ".pdparams",
    ".pdmodel",
    ".model",
    ".ubj",
}
DATASET_EXT = {
    ".tar",
    ".csv",
    ".zip",
    ".parquet",
    ".jsonl",
    ".arrow",
    ".tsv",
    ".tfrecord",
    ".feather",
    ".avro",
    ".orc",
    ".gz",
    ".tgz",
}
DOCS_EXT = {".md", ".adoc", ".pdf", ".rst", ".txt", ".html", ".docx"}
METADATA_EXT = {".json", ".yaml", ".yml", ".xml", ".toml"}
CODE_DIRS = {"src", "pkg", "lib", "build", "scripts", "bin", "cmd"}
DOCS_DIRS = {"docs", "doc"}
# a model file at least this many times larger than every other one is the model; the rest are parts
MAIN_MODEL_FACTOR = 2.0


def _kind(name: str) -> str:
    upper = name.upper()
    if upper.startswith(("README", "LICENSE", "LICENCE")):
        return "docs"
    ext = os.path.splitext(name)[1].lower()
    if ext in MODEL_EXT:
        return "model"
    if ext in DATASET_EXT:
        return "dataset"
    if ext in DOCS_EXT:
        return "docs"
    if ext in METADATA_EXT:
        return "metadata"
    return "code"


def _files(directory: Path) -> list[Path]:
    out: list[Path] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out.extend(Path(root) / f for f in sorted(files) if not f.startswith("."))
    return out


@dataclass
class _Found:
    models: list[tuple[str, int]] = field(default_factory=list)
    metadata: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    docs: list[Docs] = field(default_factory=list)
    code_special: list[str] = field(default_factory=list)
    code_other: list[str] = field(default_factory=list)
    loose_code: bool = False


def generate_kitfile(
    context: Path, name: str | None = None, description: str | None = None, author: str | None = None
) -> Kitfile:
    """A Kitfile for ``context``; ``name``/``description``/``author`` override the package fields."""
    found = _Found()
    for entry in sorted(os.listdir(context), key=lambda n: n.encode()):
        if entry in ALWAYS_IGNORED or entry.startswith("."):
            continue
        path = context / entry
        if path.is_dir():
            _classify_dir(context, entry, found)
        elif path.is_file():
            _classify_file(entry, path.stat().st_size, found)
    kf = Kitfile(
        manifest_version=MANIFEST_VERSION,
        package=Package(name=name or context.name, description=description, authors=[author] if author else None),
    )
    if found.models:
        main = _main_model(found.models)
        rest = [p for p, _ in found.models if p != main[0]]
        model = Model(path=main[0], name=main[1])
        parts = [ModelPart(path=p) for p in rest + found.metadata]
        model.parts = parts or None
        kf.model = model
    elif found.metadata:
        if found.datasets:
            found.datasets.extend(found.metadata)
        else:
            found.loose_code = True
    if found.datasets:
        kf.datasets = [Dataset(path=p) for p in found.datasets]
    if found.docs:
        kf.docs = found.docs
    code = sorted(found.code_special) + found.code_other + (["."] if found.loose_code else [])
    if code:
        kf.code = [Code(path=p) for p in code]
    return kf


def _main_model(models: list[tuple[str, int]]) -> tuple[str, str | None]:
    if len(models) == 1:
        return models[0][0], _stem(models[0][0])
    by_size = sorted(models, key=lambda m: m[1], reverse=True)
    if by_size[0][1] >= MAIN_MODEL_FACTOR * by_size[1][1] > 0:
        return by_size[0][0], _stem(by_size[0][0])
    return models[0][0], None


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def _classify_file(rel: str, size: int, found: _Found) -> None:
    kind = _kind(os.path.basename(rel))
    if kind == "model":
        found.models.append((rel, size))
    elif kind == "dataset":
        found.datasets.append(rel)
    elif kind == "docs":
        base = os.path.basename(rel).upper()
        desc = "Readme file" if base.startswith("README") else "License file" if base.startswith("LICEN") else None
        found.docs.append(Docs(path=rel, description=desc))
    elif kind == "metadata":
        found.metadata.append(rel)
    else:
        found.loose_code = True


def _classify_dir(context: Path, name: str, found: _Found) -> None:
    if name in CODE_DIRS:
        found.code_special.append(name)
        return
    if name in DOCS_DIRS:
        found.docs.append(Docs(path=name))
        return
    files = _files(context / name)
    if not files:
        return
    kinds = {_kind(f.name) for f in files}
    if kinds <= {"model", "metadata"} and "model" in kinds:
        for f in files:
            rel = f.relative_to(context).as_posix()
            if _kind(f.name) == "model":
                found.models.append((rel, f.stat().st_size))
            else:
                found.metadata.append(rel)
    elif kinds <= {"dataset", "metadata"} and "dataset" in kinds:
        found.datasets.append(name)
    elif kinds == {"docs"}:
        found.docs.append(Docs(path=name))
    else:
        found.code_other.append(name)
