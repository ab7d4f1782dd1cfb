"""The ModelKit a packaging task pushed, as the registry has it: manifest digest, layers, the
Kitfile (the config blob) and the metrics file inside the docs layer."""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.reference import parse
from airflow_provider_training.kitops.registry import RegistryClient
from airflow_provider_training.specs.kitfile import Kitfile, KitfileError
from airflow_provider_training.ui.task import ModelKitRef

METRICS_NAMES = ("metrics.json",)
MAX_DOCS_LAYER = 16 * 1024 * 1024
MAX_CONFIG = 1024 * 1024


def registry_client(registry: str, conn_id: str | None) -> RegistryClient:
    if conn_id:
        from airflow_provider_training.hooks.registry import ModelKitRegistryHook

        return ModelKitRegistryHook(conn_id).get_conn(registry)
    return make_client(registry)


def _layer(desc: dict[str, Any]) -> dict[str, Any]:
    annotations = desc.get("annotations") or {}
    media_type = str(desc.get("mediaType") or "")
    try:
        kind = mediatypes.parse_layer_media_type(media_type)[0]
    except ValueError:
        kind = ""
    return {
        "media_type": media_type,
        "digest": desc.get("digest"),
        "size": desc.get("size"),
        "kind": kind,
        "path": annotations.get(mediatypes.ANNOTATION_FILEPATH, ""),
    }


def _member(blob: bytes, media_type: str, names: tuple[str, ...]) -> bytes | None:
    _, fmt, compression = mediatypes.parse_layer_media_type(media_type)
    if fmt != "tar":
        return None
    raw: Any = io.BytesIO(blob)
    if compression == "zstd":
        import zstandard

        raw = zstandard.ZstdDecompressor().stream_reader(raw)
    with tarfile.open(fileobj=raw, mode="r|gz" if compression.startswith("gzip") else "r|") as tar:
        for info in tar:
            if info.isfile() and info.name.rsplit("/", 1)[-1] in names:
                handle = tar.extractfile(info)
                return handle.read(MAX_DOCS_LAYER) if handle else None
    return None


def describe(ref: ModelKitRef) -> dict[str, Any]:
    """Read the ModelKit from its registry (blocking: call it in a thread)."""
    parsed = parse(ref.reference, check_tcr=False)
    target = ref.digest or parsed.target
    with registry_client(parsed.registry, ref.registry_conn_id) as client:
        data, digest = client.get_manifest(parsed.repository, target)
        manifest = json.loads(data)
        layers = [_layer(d) for d in manifest.get("layers") or []]
        kitfile, kitfile_error = "", ""
        config = manifest.get("config") or {}
        if config.get("digest"):
            try:
                kitfile = Kitfile.from_config_json(
                    client.get_blob_bytes(parsed.repository, config["digest"], limit=MAX_CONFIG)
                ).to_yaml()
            except KitfileError as exc:
                kitfile_error = str(exc)
        metrics: Any = None
        for layer in layers:
            if layer["kind"] != "docs" or not isinstance(layer["size"], int) or layer["size"] > MAX_DOCS_LAYER:
                continue
            if layer["path"] and layer["path"].rsplit("/", 1)[-1] not in METRICS_NAMES and "." in layer["path"]:
                continue
            found = _member(
                client.get_blob_bytes(parsed.repository, layer["digest"], MAX_DOCS_LAYER),
                layer["media_type"],
                METRICS_NAMES,
            )
            if found is not None:
                try:
                    metrics = json.loads(found)
                except ValueError:
                    metrics = None
                break
    return {
        "reference": ref.reference,
        "registry": parsed.registry,
        "repository": parsed.repository,
        "tag": parsed.tag,
        "digest": digest,
        "pushed_digest": ref.digest,
        "size": ref.size,
        "media_type": manifest.get("mediaType") or "",
        "artifact_type": manifest.get("artifactType") or "",
        "config": {"media_type": config.get("mediaType"), "digest": config.get("digest"), "size": config.get("size")},
        "layers": layers,
        "kitfile": kitfile,
        "kitfile_error": kitfile_error,
        "metrics": metrics,
    }
