"""The Kitfile: a strict model that reads and writes what kit reads and writes (``kitops.md`` §1, §2.3).

kit decodes Kitfiles with Go's ``yaml.v3`` and ``KnownFields(true)``: unknown keys and duplicate keys
are errors, string fields keep the literal scalar text (``version: 1.10`` is ``"1.10"``), and free-form
``parameters`` follow YAML 1.2 resolution (``yes`` stays a string, ``010`` is octal 8). PyYAML resolves
YAML 1.1, so this module composes the node tree with PyYAML and resolves scalars itself. The config
blob is the Kitfile re-serialized the way Go's ``encoding/json`` does it; :func:`go_json` writes those
bytes.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import posixpath
import re
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

MANIFEST_VERSION = "1.0.0"
DEFAULT_KITFILE_NAMES = ("Kitfile", "kitfile", ".kitfile")
PART_TYPE_RE = re.compile(r"^[\w][\w.-]*$")

LayerKind = Literal["model", "modelpart", "code", "dataset", "docs", "prompt"]


class KitfileError(ValueError):
    """A Kitfile that kit would refuse; the message names the field and how to fix it."""


# --------------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------------


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
        return go_json(self.to_go_dict())

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
        return yaml.dump(data, Dumper=_KitDumper, sort_keys=False, allow_unicode=True, width=1 << 30)

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
                out[key] = sort_free_form(value)
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


class _KitDumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # yaml.v3 indents list items under their key
        super().increase_indent(flow, False)


# --------------------------------------------------------------------------------------------------
# YAML with yaml.v3 semantics
# --------------------------------------------------------------------------------------------------


_PLAIN = "?plain"


class _Loader(yaml.SafeLoader):
    """Marks untagged plain scalars so they can be resolved with YAML 1.2 rules, not PyYAML's 1.1."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:
            return _PLAIN
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]


def load_yaml(text: str | bytes, source: str = "Kitfile") -> Any:
    """Load the first YAML document: strings keep literal text, duplicate keys are errors."""
    try:
        loader = _Loader(text)
        try:
            node = loader.get_node() if loader.check_node() else None  # first document only, like yaml.v3
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise KitfileError(f"{source}: not valid YAML: {exc}") from exc
    if node is None:
        return None
    return _construct(node, source, raw=True, path="")


_FIELDS_RESOLVED = {"parameters"}


def _construct(node: yaml.Node, source: str, raw: bool, path: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or (key_node.tag == _PLAIN and key_node.value == "<<"):
                merged = _construct(value_node, source, raw, path)
                for m in merged if isinstance(merged, list) else [merged]:
                    if isinstance(m, dict):
                        for k, v in m.items():
                            out.setdefault(k, v)
                continue
            key = _construct(key_node, source, raw=raw, path=path)
            if isinstance(key, (dict, list)):
                raise KitfileError(f"{source}: line {key_node.start_mark.line + 1}: mapping keys must be scalars")
            if key in out:
                raise KitfileError(
                    f'{source}: line {key_node.start_mark.line + 1}: mapping key "{key}" already defined'
                )
            sub = f"{path}.{key}" if path else str(key)
            child_raw = raw and str(key) not in _FIELDS_RESOLVED
            out[key] = _construct(value_node, source, child_raw, sub)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(n, source, raw, f"{path}[{i}]") for i, n in enumerate(node.value)]
    assert isinstance(node, yaml.ScalarNode)
    return _scalar(node, source, raw)


def _scalar(node: yaml.ScalarNode, source: str, raw: bool) -> Any:
    text: str = node.value
    # quoted/block scalars and explicit !!str are strings; other explicit tags resolve like plain
    explicit_str = node.tag in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:binary")
    if node.tag != _PLAIN and (explicit_str or node.style):
        return text
    resolved = resolve_plain(text)
    if raw:
        # a string field takes the literal text of any non-null scalar (yaml.v3 decoding into string)
        return None if resolved is None else text
    return resolved


_FLOAT_RE = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_DATE_RE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$")
_DATETIME_RE = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})[Tt ](\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?\s*(Z|[-+]\d{1,2}(:?\d{2})?)?$"
)

_Resolved = None | bool | int | float | str | dt.datetime


def resolve_plain(text: str) -> _Resolved:
    """Resolve an unquoted scalar the way yaml.v3 does when decoding into ``any``."""
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if text in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"):
        return math.inf
    if text in ("-.inf", "-.Inf", "-.INF"):
        return -math.inf
    if text in (".nan", ".NaN", ".NAN"):
        return math.nan
    if not text or text[0] not in "0123456789+-.":
        return text
    stamp = _timestamp(text)
    if stamp is not None:
        return stamp
    plain = text.replace("_", "")
    number = _go_parse_int(plain)
    if number is not None and -(1 << 63) <= number < (1 << 64):
        return number
    if _FLOAT_RE.match(plain):
        try:
            return float(plain)
        except ValueError:
            pass
    for prefix, base in (("0b", 2), ("-0b", 2), ("0o", 8), ("-0o", 8)):
        if plain.startswith(prefix):
            try:
                return int(plain.replace(prefix, "-" if prefix[0] == "-" else "", 1) or "x", base)
            except ValueError:
                return text
    return text


def _go_parse_int(s: str) -> int | None:
    """``strconv.ParseInt(s, 0, 64)``: 0x/0o/0b prefixes, a leading 0 means octal."""
    sign = 1
    body = s
    if body[:1] in "+-":
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if not body:
        return None
    base = 10
    low = body.lower()
    if low.startswith("0x"):
        base, body = 16, body[2:]
    elif low.startswith("0o"):
        base, body = 8, body[2:]
    elif low.startswith("0b"):
        base, body = 2, body[2:]
    elif len(body) > 1 and body[0] == "0":
        base, body = 8, body[1:]
    if not body or not all(c in "0123456789abcdefABCDEF"[: base if base <= 10 else 22] for c in body):
        return None
    try:
        return sign * int(body, base)
    except ValueError:
        return None


def _timestamp(text: str) -> dt.datetime | None:
    m = _DATE_RE.match(text)
    if m:
        try:
            return dt.datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=dt.timezone.utc)
        except ValueError:
            return None
    m = _DATETIME_RE.match(text)
    if not m:
        return None
    try:
        frac = int(((m[7] or ".0")[1:] + "000000")[:6])
        tz = dt.timezone.utc
        if m[8] and m[8] != "Z":
            sign = -1 if m[8][0] == "-" else 1
            digits = m[8][1:].replace(":", "")
            hours, minutes = int(digits[:2] if len(digits) > 2 else digits), int(digits[2:] or 0)
            tz = dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes))
        return dt.datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]), frac, tzinfo=tz)
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------------
# Go encoding/json
# --------------------------------------------------------------------------------------------------


def go_json(value: Any) -> bytes:
    """Compact JSON byte-identical to Go's ``json.Marshal`` for the value kinds a Kitfile holds."""
    return "".join(_go_json_parts(value)).encode("utf-8")


def _go_json_parts(value: Any) -> Iterator[str]:
    if value is None:
        yield "null"
    elif value is True:
        yield "true"
    elif value is False:
        yield "false"
    elif isinstance(value, int):
        yield str(value)
    elif isinstance(value, float):
        yield go_float(value)
    elif isinstance(value, str):
        yield go_string(value)
    elif isinstance(value, dt.datetime):
        yield go_string(_go_time(value))
    elif isinstance(value, dict):
        # struct-shaped dicts keep their order; free-form maps were sorted by sort_free_form
        yield "{"
        first = True
        for k, v in value.items():
            if not isinstance(k, str):
                raise KitfileError(f"json: unsupported map key {k!r} in parameters (use string keys)")
            if not first:
                yield ","
            first = False
            yield go_string(k)
            yield ":"
            yield from _go_json_parts(v)
        yield "}"
    elif isinstance(value, (list, tuple)):
        yield "["
        for i, v in enumerate(value):
            if i:
                yield ","
            yield from _go_json_parts(v)
        yield "]"
    else:
        raise KitfileError(f"json: unsupported value {value!r}")


def go_float(f: float) -> str:
    """``strconv.FormatFloat`` as encoding/json uses it: shortest digits, exponent only when tiny/huge."""
    if math.isinf(f) or math.isnan(f):
        raise KitfileError(f"json: unsupported value: {f} (remove .inf/.nan from parameters)")
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    d = Decimal(repr(f)).normalize()
    if abs(f) < 1e-6 or abs(f) >= 1e21:
        sign, digits, exp = d.as_tuple()
        text = "".join(map(str, digits))
        mant = text[0] + ("." + text[1:] if len(text) > 1 else "")
        e = int(exp) + len(text) - 1
        return f"{'-' if sign else ''}{mant}e{'-' if e < 0 else '+'}{abs(e)}"
    return format(d, "f")


def go_string(s: str) -> str:
    out = json.dumps(s, ensure_ascii=False)
    return (
        out.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _go_time(t: dt.datetime) -> str:
    text = t.isoformat()
    if t.microsecond:
        head, _, rest = text.partition(".")
        frac = rest[:6].rstrip("0")
        text = f"{head}.{frac}{rest[6:]}"
    return text.replace("+00:00", "Z")


def sort_free_form(value: Any) -> Any:
    """Go marshals ``map[string]any`` with sorted keys."""
    if isinstance(value, dict):
        return {k: sort_free_form(value[k]) for k in sorted(value, key=lambda k: str(k).encode())}
    if isinstance(value, list):
        return [sort_free_form(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------------
# Validation (rules of the newest kit, §1.3)
# --------------------------------------------------------------------------------------------------

_REFERENCE_HINT = re.compile(r"[:@]")


def is_modelkit_reference(path: str) -> bool:
    """kit's ``IsModelKitReference``: contains ``:`` or ``@`` and parses as a reference (§1.5)."""
    if not _REFERENCE_HINT.search(path) or "://" in path:
        return False
    return parse_reference_loosely(path)


_REPO_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*"
_REPO_RE = re.compile(rf"^{_REPO_COMPONENT}(?:/{_REPO_COMPONENT})*$")
_TAG_RE = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST_RE = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")


def parse_reference_loosely(ref: str) -> bool:
    """Whether ``ref`` is a syntactically valid ModelKit reference (no TCR rules)."""
    ref = ref.split(",", 1)[0]
    rest, tag, digest = ref, "", ""
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not _DIGEST_RE.match(digest):
            return False
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
        if not _TAG_RE.match(tag):
            return False
    parts = rest.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    repo = "/".join(parts)
    return bool(_REPO_RE.match(repo))


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
