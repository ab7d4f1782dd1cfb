"""The Kitfile rules of the newest kit's validator (``kitops.md`` §1.3), in its wording."""

from __future__ import annotations

import posixpath
import re

from airflow_provider_training.specs.kitfile.errors import KitfileError
from airflow_provider_training.specs.kitfile.model import Kitfile
from airflow_provider_training.specs.kitfile.reference import is_modelkit_reference

PART_TYPE_RE = re.compile(r"^[\w][\w.-]*$")


def validate(kitfile: Kitfile) -> tuple[list[str], list[str]]:
    """Return (errors, warnings) as kit's newest validator words them."""
    errors: list[str] = []
    warnings: list[str] = []
    if kitfile.manifest_version not in (None, "", "1.0.0", "1.0"):
        errors.append(
            f"invalid manifestVersion {kitfile.manifest_version!r}: only 1.0.0 is supported "
            "(set manifestVersion: 1.0.0)"
        )
    seen: dict[str, str] = {}

    def check(path: str | None, label: str, section: str, allow_ref: bool = False) -> None:
        raw = path or ""
        if "://" in raw:
            scheme = raw.split("://", 1)[0].lower()
            if scheme in ("http", "https"):
                errors.append(f"invalid path for {section}: HTTP urls are not supported in paths ({raw})")
            else:
                errors.append(f"invalid path for {section}: unrecognized URL in path ({raw})")
            return
        if is_modelkit_reference(raw):
            if not allow_ref:
                errors.append(f"invalid path for {section}: only local paths are permitted ({raw})")
            return
        if raw.startswith("/"):
            errors.append(f"absolute paths are not supported in a Kitfile (path {raw} in {label})")
            return
        clean = posixpath.normpath(raw) if raw else "."
        if clean == ".." or clean.startswith("../"):
            errors.append(
                f"paths outside the context directory are not supported in a Kitfile (path {clean} in {label})"
            )
            return
        if clean in seen:
            errors.append(f"{seen[clean]} and {label} use the same path {clean}")
        else:
            seen[clean] = label

    if kitfile.model is not None:
        if kitfile.model.path is not None or not kitfile.model.parts:
            check(kitfile.model.path, f"model {kitfile.model.name or ''}".strip(), "model", allow_ref=True)
        for i, part in enumerate(kitfile.model.parts or []):
            check(part.path, f"modelpart {part.name or i}", "model part")
            if part.type and (not PART_TYPE_RE.match(part.type) or len(part.type) > 64):
                errors.append(
                    f"model part {part.name or i} has invalid type {part.type!r}: must match "
                    r"^[\w][\w.-]*$ and be fewer than 64 characters"
                )
    for i, ds in enumerate(kitfile.datasets or []):
        check(ds.path, f"dataset layer {i}", "dataset")
        if ds.remote_path:
            if ds.remote_path.startswith("s3://"):
                if not ds.remote_hash:
                    errors.append(
                        f"invalid remotePath for dataset layer {i}: remoteHash is required when remote "
                        "dataset paths are used"
                    )
            elif not is_modelkit_reference(ds.remote_path):
                errors.append(f"invalid remotePath for dataset layer {i}: must be a ModelKit reference or s3:// URL")
    for i, code in enumerate(kitfile.code or []):
        check(code.path, f"code layer {i}", "code")
    for i, doc in enumerate(kitfile.docs or []):
        check(doc.path, f"docs layer {i}", "docs")
    for i, prompt in enumerate(kitfile.prompts or []):
        check(prompt.path, f"prompt layer {i}", "prompt")
    names: set[str] = set()
    for i, server in enumerate(kitfile.mcp_servers or []):
        if not server.name:
            errors.append(f"mcpServers[{i}]: name is required")
        elif server.name in names:
            errors.append(f"mcpServers[{i}]: duplicate name {server.name}")
        else:
            names.add(server.name)
        if not (server.path or "").endswith(".mcpb"):
            errors.append(f"mcpServers[{i}]: path must be a single .mcpb file")
        else:
            check(server.path, f"mcpServer {server.name or i}", "mcpServers")
    return sorted(errors), warnings


def check(kitfile: Kitfile, source: str = "Kitfile") -> list[str]:
    """Raise :class:`KitfileError` with kit's message format if invalid; return warnings."""
    errors, warnings = validate(kitfile)
    if errors:
        raise KitfileError(f"errors while validating Kitfile ({source}): \n" + "\n".join(f"  * {e}" for e in errors))
    return warnings


def clean_path(path: str | None) -> str:
    """``filepath.Clean`` of a Kitfile path; empty means the context directory."""
    return posixpath.normpath(path) if path else "."
