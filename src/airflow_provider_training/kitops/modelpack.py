"""CNCF ModelPack (``modelpack/model-spec`` v1) next to KitOps' own format (``kitops.md`` §2.5).

Writing: the config is a model-spec ``Model`` (descriptor, modelfs, config) and the full Kitfile
travels in the manifest annotation ``ml.kitops.modelkit.kitfile``, as kit does. Reading: the
Kitfile comes from that annotation, else (a ModelPack written by another tool) it is synthesised
from the layers' ``org.cncf.model.filepath`` annotations, as kit's ``GetKitfileForManifest``.

Decisions where kit is not reproducible: ``createdAt`` is left out (kit writes ``time.Now()``,
which gives a new digest per pack; the field is optional in model-spec), and ``diffIds`` are the
layers' real diffIds (kit ≤ Jan 2026 hashed the diffId's text, fixed upstream since).
"""

from __future__ import annotations

import json
from typing import Any

from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.specs.gojson import go_json
from airflow_provider_training.specs.kitfile import (
    Code,
    Dataset,
    Docs,
    Kitfile,
    KitfileError,
    Model,
    ModelPart,
)


def _licenses(kf: Kitfile) -> list[str]:
    found = {kf.package.license}
    if kf.model is not None:
        found.add(kf.model.license)
        found.update(p.license for p in kf.model.parts or [])
    found.update(d.license for d in kf.datasets or [])
    found.update(c.license for c in kf.code or [])
    return sorted(x for x in found if x)


def config_json(kf: Kitfile, diff_ids: list[str]) -> bytes:
    """The ModelPack config blob for a Kitfile whose layers have the given diffIds (layer order)."""
    model = kf.model
    descriptor: dict[str, Any] = {
        "authors": [a for a in kf.package.authors or [] if a] or None,
        "name": (model.name if model else None) or kf.package.name,
        "version": (model.version if model else None) or kf.package.version,
        "licenses": _licenses(kf) or None,
        "title": kf.package.name,
        "description": kf.package.description or (model.description if model else None),
    }
    config: dict[str, Any] = {}
    if model is not None and model.format:
        config["format"] = model.format
    doc = {
        "descriptor": {k: v for k, v in descriptor.items() if v},
        "modelfs": {"type": "layers", "diffIds": diff_ids},
        "config": config,
    }
    return go_json(doc)


def kitfile_json(kf: Kitfile) -> str:
    """The Kitfile (with digests) as kit stores it in the ``ml.kitops.modelkit.kitfile`` annotation."""
    return kf.to_config_json().decode()


def read_kitfile(manifest: dict[str, Any], config: bytes, source: str = "ModelKit") -> Kitfile:
    """The Kitfile of a ModelKit or ModelPack manifest (with ``config`` its config blob)."""
    fmt = mediatypes.manifest_format(manifest)
    if fmt == "kitops":
        return Kitfile.from_config_json(config, source)
    if fmt != "modelpack":
        raise KitfileError(f"{source} is not a ModelKit or ModelPack")
    annotation = (manifest.get("annotations") or {}).get(mediatypes.ANNOTATION_KITFILE)
    if annotation:
        return Kitfile.from_config_json(annotation.encode(), f"{source} ({mediatypes.ANNOTATION_KITFILE})")
    return kitfile_for_manifest(manifest, config, source)


def kitfile_for_manifest(manifest: dict[str, Any], config: bytes, source: str = "ModelPack") -> Kitfile:
    """A Kitfile synthesised from a ModelPack without kit's annotation: weight -> model (the first;
    further weights become parts), weight.config -> model parts, doc -> docs, dataset -> datasets,
    code -> code; diffIds from the config's ``modelfs`` in layer order."""
    try:
        diff_ids = (json.loads(config).get("modelfs") or {}).get("diffIds") or []
    except (ValueError, AttributeError) as exc:
        raise KitfileError(f"{source}: the ModelPack config is not valid JSON ({exc})") from None
    kf = Kitfile.model_validate({"manifestVersion": "1.0.0"})
    for i, layer in enumerate(manifest.get("layers") or []):
        base, _, _ = mediatypes.parse_layer_media_type(layer["mediaType"])
        path = (layer.get("annotations") or {}).get(mediatypes.ANNOTATION_FILEPATH)
        if not path:
            raise KitfileError(f"{source}: layer {i} ({layer['digest']}) has no {mediatypes.ANNOTATION_FILEPATH}")
        info = {"path": path, "digest": layer["digest"], "diffId": diff_ids[i] if i < len(diff_ids) else None}
        if base == "model" and (kf.model is None or not kf.model.path):
            parts = kf.model.parts if kf.model else None
            kf.model = Model.model_validate({**info, "parts": parts})
        elif base in ("model", "modelpart"):
            if kf.model is None:
                kf.model = Model()
            kf.model.parts = [*(kf.model.parts or []), ModelPart.model_validate(info)]
        elif base == "docs":
            kf.docs = [*(kf.docs or []), Docs.model_validate(info)]
        elif base == "dataset":
            kf.datasets = [*(kf.datasets or []), Dataset.model_validate(info)]
        else:
            kf.code = [*(kf.code or []), Code.model_validate(info)]
    return kf
