"""The Kitfile model: a strict pydantic model of what kit reads and writes (``kitops.md`` §1, §2.3),
read from YAML or a config blob, written as the config blob (Go JSON in kit's key order) or as the
YAML ``kit unpack`` writes back."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from airflow_provider_training.specs.gojson import UnsupportedValueError, go_json, sorted_map
from airflow_provider_training.specs.kitfile.errors import KitfileError
from airflow_provider_training.specs.kitfile.reference import is_modelkit_reference
from airflow_provider_training.specs.kitfile.yaml12 import dump_yaml, load_yaml

MANIFEST_VERSION = "1.0.0"
DEFAULT_KITFILE_NAMES = ("Kitfile", "kitfile", ".kitfile")

LayerKind = Literal["model", "modelpart", "code", "dataset", "docs", "prompt"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class LayerInfo(_Strict):
    """``digest``/``diffId`` that kit fills into an entry of the config blob (never in Kitfile YAML)."""

    digest: str | None = None
    diff_id: str | None = Field(default=None, alias="diffId")


class Package(_Strict):
    name: str | None = None
    version: str | None = None
    description: str | None = None
    license: str | None = None
    authors: list[str | None] | None = None


class ModelPart(LayerInfo):
    name: str | None = None
    path: str | None = None
    license: str | None = None
    type: str | None = None


class Model(LayerInfo):
    name: str | None = None
    path: str | None = None
    license: str | None = None
    framework: str | None = None
    format: str | None = None
    version: str | None = None
    description: str | None = None
    parts: list[ModelPart] | None = None
    parameters: Any = None


class Code(LayerInfo):
    path: str | None = None
    description: str | None = None
    license: str | None = None


class Dataset(LayerInfo):
    name: str | None = None
    path: str | None = None
    remote_path: str | None = Field(default=None, alias="remotePath")
    remote_hash: str | None = Field(default=None, alias="remoteHash")
    description: str | None = None
    license: str | None = None
    parameters: Any = None


class Docs(LayerInfo):
    path: str | None = None
    description: str | None = None


class Prompt(LayerInfo):
    name: str | None = None
    path: str | None = None
    description: str | None = None


class McpServer(LayerInfo):
    name: str | None = None
    path: str | None = None
    description: str | None = None


class Kitfile(_Strict):
    """A Kitfile. Field order is kit's emission order (§1.2)."""

    manifest_version: str | None = Field(default=None, alias="manifestVersion")
    package: Package = Field(default_factory=Package)
    model: Model | None = None
    code: list[Code] | None = None
    datasets: list[Dataset] | None = None
    docs: list[Docs] | None = None
    prompts: list[Prompt] | None = None
    mcp_servers: list[McpServer] | None = Field(default=None, alias="mcpServers")

    # -- reading ------------------------------------------------------------------------------
    @classmethod
    def from_yaml(cls, text: str | bytes, source: str = "Kitfile") -> Kitfile:
        """Parse Kitfile YAML the way kit does; errors name ``source`` and the offending field."""
        data = load_yaml(text, source)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise KitfileError(f"{source}: the top level must be a mapping of Kitfile fields")
        _reject_layer_info(data, source)
        return cls._validate_data(data, source)

    @classmethod
    def from_config_json(cls, raw: bytes, source: str = "config") -> Kitfile:
        """Read a ModelKit config blob (the Kitfile as JSON, with ``digest``/``diffId``)."""
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise KitfileError(f"{source}: not valid JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise KitfileError(f"{source}: expected a JSON object")
        return cls._validate_data(data, source)

    @classmethod
    def _validate_data(cls, data: dict[str, Any], source: str) -> Kitfile:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise KitfileError(_describe(exc, source)) from None

    # -- writing ------------------------------------------------------------------------------
    def to_config_json(self) -> bytes:
        """The config blob: compact Go JSON in kit's key order, ``package`` always present."""
        try:
            return go_json(self.to_go_dict())
        except UnsupportedValueError as exc:  # only free-form parameters can hold what Go refuses
            raise KitfileError(f"{exc} in the Kitfile's parameters (JSON has no .inf/.nan, keys are strings)") from None

    def to_go_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"manifestVersion": self.manifest_version or ""}
        out["package"] = _entry(self.package, keep=())
        if self.model is not None:
            model = _entry(self.model, keep=())
            if self.model.parts:
                model["parts"] = [_entry(p, keep=()) for p in self.model.parts]
            # parts must sit before parameters, which _entry already placed in field order
            out["model"] = _reorder(model, list(Model.model_fields))
        for key, items, keep in (
            ("code", self.code, ()),
            ("datasets", self.datasets, ()),
            ("docs", self.docs, ("path",)),
            ("prompts", self.prompts, ()),
            ("mcpServers", self.mcp_servers, ()),
        ):
            if items:
                out[key] = [_entry(i, keep=keep) for i in items]
        return out

    def to_yaml(self) -> str:
        """Kitfile YAML as ``kit unpack`` writes it back: no digests, empty sections omitted."""
        data = self.to_go_dict()
        data = _strip_layer_info(data)
        if not data.get("package"):
            data.pop("package", None)
        return dump_yaml(data)

    # -- queries ------------------------------------------------------------------------------
    def layer_entries(self) -> Iterator[tuple[LayerKind, int, LayerInfo, str]]:
        """Entries that produce a layer, in kit's layer order: model, parts, code, datasets, docs,
        prompts. ModelKit references in ``model.path`` and remote datasets produce none."""
        if self.model is not None:
            if self.model.path and not is_modelkit_reference(self.model.path):
                yield "model", 0, self.model, self.model.path
            for i, part in enumerate(self.model.parts or []):
                yield "modelpart", i, part, part.path or ""
        for i, code in enumerate(self.code or []):
            yield "code", i, code, code.path or ""
        for i, ds in enumerate(self.datasets or []):
            if not ds.remote_path:
                yield "dataset", i, ds, ds.path or ""
        for i, doc in enumerate(self.docs or []):
            yield "docs", i, doc, doc.path or ""
        for i, prompt in enumerate(self.prompts or []):
            yield "prompt", i, prompt, prompt.path or ""

    def model_reference(self) -> str | None:
        if self.model is not None and self.model.path and is_modelkit_reference(self.model.path):
            return self.model.path
        return None


def _entry(obj: BaseModel, keep: Sequence[str]) -> dict[str, Any]:
    """Go ``omitempty``: drop empty strings, empty lists and nil; ``keep`` lists fields without it."""
    out: dict[str, Any] = {}
    for name, field in type(obj).model_fields.items():
        key = field.alias or name
        value = getattr(obj, name)
        if key == "parts":
            continue
        if isinstance(value, BaseModel):
            value = _entry(value, keep=())
        if key in keep:
            out[key] = "" if value is None else value
        elif key == "parameters":
            if value is not None:  # omitempty on an interface only drops nil
                out[key] = sorted_map(value)
        elif value is None or value == "" or value == []:
            continue
        elif key == "authors":
            out[key] = ["" if a is None else a for a in value]
        else:
            out[key] = value
    if "digest" in out or "diffId" in out:
        # LayerInfo fields are declared first in the class but kit emits them last
        info: dict[str, Any] = {k: out.pop(k) for k in ("digest", "diffId") if k in out}
        out.update(info)
    return out


def _reorder(d: dict[str, Any], field_names: list[str]) -> dict[str, Any]:
    keys = [Model.model_fields[n].alias or n for n in field_names]
    order = [k for k in keys if k not in ("digest", "diffId")] + ["digest", "diffId"]
    return {k: d[k] for k in order if k in d}


def _strip_layer_info(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_layer_info(v) for k, v in value.items() if k not in ("digest", "diffId")}
    if isinstance(value, list):
        return [_strip_layer_info(v) for v in value]
    return value


def _reject_layer_info(data: dict[str, Any], source: str) -> None:
    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k in ("digest", "diffId") and where and not where.endswith("parameters"):
                    raise KitfileError(
                        f"{source}: field {where}.{k} not found in type Kitfile "
                        "(digest and diffId are computed by pack, remove them)"
                    )
                if k != "parameters":
                    walk(v, f"{where}.{k}" if where else str(k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]")

    walk(data, "")


def _describe(exc: ValidationError, source: str) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in err["loc"]).replace(".[", "[")
        if err["type"] == "extra_forbidden":
            lines.append(f"field {loc} not found in type Kitfile (unknown key; check its spelling)")
        else:
            lines.append(f"field {loc}: {err['msg']}")
    return f"{source}: invalid Kitfile:\n" + "\n".join(f"  * {line}" for line in lines)
