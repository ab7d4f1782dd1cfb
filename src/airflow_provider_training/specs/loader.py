"""Turn what a user hands us — a dict, YAML text, a YAML file or a model — into typed jobs.

Errors are collected and raised as one :class:`JobSpecError` that names the file, document, line
and column or Kubernetes field path. Untrusted YAML is parsed defensively: no Python tags, no
timestamp magic (Kubernetes sees strings), and a document whose aliases would expand past a node
budget (a "billion laughs" bomb) is refused before anything is built from it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from airflow_provider_training.specs import kinds
from airflow_provider_training.specs.crds import openapi_schema
from airflow_provider_training.specs.issues import Issue
from airflow_provider_training.specs.jobs import TrainingJob, job_class
from airflow_provider_training.specs.schema import SchemaResult, check
from airflow_provider_training.specs.schema import type_name as _type_name
from airflow_provider_training.specs.yamltags import RememberedTags

MAX_DOCUMENT_BYTES = 3 * 1024 * 1024  # the API server's request-body limit
MAX_EXPANDED_NODES = 200_000
MAX_NESTING = 64
# documents per file or stream: far more jobs than a DAG repo holds, few enough to refuse a stream of
# empty documents in well under a second
MAX_DOCUMENTS = 10_000

Source = Mapping[str, Any] | str | os.PathLike[str] | TrainingJob


class JobSpecError(ValueError):
    """A job document that cannot be used, with every problem found in it."""

    def __init__(self, source: str, issues: list[Issue]) -> None:
        self.source = source
        self.issues = issues
        lines = "\n".join(f"  {issue}" for issue in issues)
        super().__init__(f"{source}: invalid job document:\n{lines}" if source else f"invalid job document:\n{lines}")


@dataclass
class Document:
    """One parsed document and where it came from (``file.yaml#2`` for the second document)."""

    source: str
    data: dict[str, Any]
    schema: SchemaResult | None = None
    job: TrainingJob | None = None
    issues: list[Issue] = field(default_factory=list)


class _PyLoader(yaml.SafeLoader):
    """SafeLoader without the timestamp resolver: ``2024-01-01`` stays a string, as in Kubernetes."""


_RESOLVERS = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_PyLoader.yaml_implicit_resolvers = _RESOLVERS
_Loader: Any = _PyLoader
if yaml.__with_libyaml__:

    class _CLoader(RememberedTags, yaml.CSafeLoader):
        """The same on libyaml's parser, where PyYAML has it: composing a document there is ~40
        times faster than in Python (a 400-deep document: 54 ms against 1.3 ms)."""

    _CLoader.yaml_implicit_resolvers = _RESOLVERS
    _Loader = _CLoader


def _tree_size(node: yaml.Node, depth: int) -> int:
    """:func:`_expanded_size` of a document without aliases (a tree: nothing shared, no cycles)."""
    if depth > MAX_NESTING:
        raise _TooDeep
    kind = type(node)
    size = 1
    if kind is yaml.SequenceNode:
        for child in node.value:
            size += _tree_size(child, depth + 1)
    elif kind is yaml.MappingNode:
        for key, value in node.value:
            size += _tree_size(key, depth + 1) + _tree_size(value, depth + 1)
    return size


_STR, _MAP, _SEQ = (f"tag:yaml.org,2002:{tag}" for tag in ("str", "map", "seq"))


def _tree(node: yaml.Node, constructor: Any) -> Any:
    """``constructor.construct_document(node)`` for a document without aliases: strings, string-keyed
    mappings and lists built here, anything else (ints, merge keys, explicit tags …) by PyYAML.
    PyYAML's way keeps the bookkeeping that aliases and recursive objects need, two thirds of
    loading a Kubernetes document that has none."""
    kind = type(node)
    if kind is yaml.ScalarNode and node.tag == _STR:
        return node.value
    if kind is yaml.MappingNode and node.tag == _MAP:
        pairs = node.value
        if all(type(key) is yaml.ScalarNode and key.tag == _STR for key, _ in pairs):
            return {key.value: _tree(value, constructor) for key, value in pairs}
    elif kind is yaml.SequenceNode and node.tag == _SEQ:
        return [_tree(item, constructor) for item in node.value]
    return constructor.construct_document(node)


def _expanded_size(node: yaml.Node, memo: dict[int, int], depth: int) -> int:
    if depth > MAX_NESTING:
        raise _TooDeep
    key = id(node)
    if memo.get(key) == _IN_PROGRESS:
        raise _Recursive(node)  # an alias inside its own anchor: no JSON document can hold it
    if key in memo:
        return memo[key]
    memo[key] = _IN_PROGRESS
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(child, memo, depth + 1) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(k, memo, depth + 1) + _expanded_size(v, memo, depth + 1) for k, v in node.value)
    memo[key] = size
    return size


class _TooDeep(Exception):
    pass


_IN_PROGRESS = -1


class _Recursive(Exception):
    def __init__(self, node: yaml.Node) -> None:
        super().__init__(f"line {node.start_mark.line + 1}")
        self.line = node.start_mark.line + 1


def parse_yaml(text: str, source: str = "<string>") -> list[Document]:
    """Parse every document of a YAML stream; raise :class:`JobSpecError` with line and column."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES:
        raise JobSpecError(
            source,
            [Issue("", f"is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB, the Kubernetes request limit")],
        )
    try:
        limit = int(os.environ.get("AIRFLOW_TRAINING_MAX_DOCUMENTS", MAX_DOCUMENTS))
        nodes = []
        for node in yaml.compose_all(text, Loader=_Loader):
            nodes.append(node)
            if len(nodes) > limit:
                raise JobSpecError(
                    source,
                    [Issue("", f"holds more than {limit} YAML documents; split it (AIRFLOW_TRAINING_MAX_DOCUMENTS)")],
                )
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise JobSpecError(source, [Issue("", f"malformed YAML: {where}{exc.problem or exc}")]) from None
    except yaml.YAMLError as exc:
        raise JobSpecError(source, [Issue("", f"malformed YAML: {exc}")]) from None
    documents: list[Document] = []
    constructor = _Loader("")  # builds objects from composed nodes; one for the stream, not one per document
    for number, node in enumerate(nodes, start=1):
        name = source if len(nodes) == 1 else f"{source}#{number}"
        if node is None:
            continue
        try:
            # an alias needs a "*": without one the document is a tree, counted without bookkeeping
            size = _expanded_size(node, {}, 0) if "*" in text else _tree_size(node, 0)
        except _TooDeep:
            raise JobSpecError(name, [Issue("", f"document nests deeper than {MAX_NESTING} levels")]) from None
        except _Recursive as exc:
            raise JobSpecError(
                name, [Issue("", f"line {exc.line}: recursive alias (an anchor that contains itself); expand it")]
            ) from None
        if size > MAX_EXPANDED_NODES:
            raise JobSpecError(
                name,
                [
                    Issue(
                        "",
                        f"document expands to more than {MAX_EXPANDED_NODES} nodes through YAML aliases; refusing it",
                    )
                ],
            )
        try:
            data = _tree(node, constructor) if "*" not in text else constructor.construct_document(node)
        except (yaml.YAMLError, RecursionError, TypeError, ValueError) as exc:
            raise JobSpecError(name, [Issue("", f"malformed YAML: {exc}")]) from None
        if data is None:
            continue
        if not isinstance(data, dict):
            raise JobSpecError(name, [Issue("", f"expected a mapping (a Kubernetes object), got {_type_name(data)}")])
        documents.append(Document(name, data))
    return documents


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and text.strip().endswith((".yaml", ".yml", ".json"))


def read_documents(source: Source | Iterable[Source], name: str | None = None) -> list[Document]:
    """Parse without checking: dicts, YAML text, paths (multi-document files), or lists of them."""
    if isinstance(source, TrainingJob):
        return [Document(name or f"{source.kind}/{source.name}", source.to_dict())]
    if isinstance(source, Mapping):
        return [Document(name or "<dict>", dict(source))]
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(source)
        if not path.is_file():
            raise JobSpecError(str(path), [Issue("", "file not found")])
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            raise JobSpecError(str(path), [Issue("", "is larger than 3 MiB, the Kubernetes request limit")])
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise JobSpecError(str(path), [Issue("", f"is not UTF-8 text: {exc}")]) from None
        return parse_yaml(text, name or str(path))
    if isinstance(source, str):
        return parse_yaml(source, name or "<string>")
    if isinstance(source, Iterable):
        return [doc for item in source for doc in read_documents(item)]
    raise JobSpecError(name or "<input>", [Issue("", f"cannot load a job from {type(source).__name__}")])


def identify(doc: Document) -> list[Issue]:
    """apiVersion and kind must name one of the training-job kinds."""
    kind = doc.data.get("kind")
    api_version = doc.data.get("apiVersion")
    if not isinstance(kind, str) or kind not in kinds.KINDS:
        supported = ", ".join(kinds.KINDS)
        return [Issue("kind", f'Unsupported value: "{kind}": supported values: {supported}')]
    if api_version != kinds.API_VERSION:
        return [Issue("apiVersion", f'Unsupported value: "{api_version}": {kind} is served as "{kinds.API_VERSION}"')]
    return []


def check_schema(doc: Document) -> SchemaResult:
    """Check a training-job document against its CRD (ObjectMeta checked generically)."""
    info = kinds.KINDS[doc.data["kind"]]
    result = check(doc.data, _with_object_meta(openapi_schema(info)))
    doc.schema = result
    return result


_OBJECT_META: dict[str, Any] = {
    "type": "object",
    "properties": {
        **{
            key: {"type": "string"}
            for key in (
                "name",
                "generateName",
                "namespace",
                "selfLink",
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "deletionTimestamp",
            )
        },
        "generation": {"type": "integer", "format": "int64"},
        "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["apiVersion", "kind", "name", "uid"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "name": {"type": "string"},
                    "uid": {"type": "string"},
                    "controller": {"type": "boolean"},
                    "blockOwnerDeletion": {"type": "boolean"},
                },
            },
        },
        "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    },
}


def _with_object_meta(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "properties": {**schema["properties"], "metadata": _OBJECT_META}}


def build(doc: Document) -> TrainingJob:
    """The typed job of a document that passed :func:`identify` and :func:`check_schema`."""
    from pydantic import ValidationError

    try:
        job = job_class(doc.data["kind"]).model_validate(doc.data)
    except ValidationError as exc:  # pragma: no cover - the schema check catches these first
        issues = [Issue(".".join(str(p) for p in err["loc"]), err["msg"]) for err in exc.errors()]
        raise JobSpecError(doc.source, issues) from None
    doc.job = job
    return job


def load_jobs(source: Source | Iterable[Source]) -> list[TrainingJob]:
    """Load every training job in ``source``.

    Raises :class:`JobSpecError` for malformed YAML, a document that is not a training job, or
    values of the wrong type (the schema check a cluster applies before anything else). Webhook
    rules and lint are :func:`airflow_provider_training.validation.validate`'s job; unknown fields
    are kept so the document round-trips unchanged.
    """
    jobs: list[TrainingJob] = []
    for doc in read_documents(source):
        issues = identify(doc)
        if not issues:
            issues = check_schema(doc).errors
        if issues:
            raise JobSpecError(doc.source, issues)
        jobs.append(build(doc))
    return jobs


def load_job(source: Source) -> TrainingJob:
    """Load exactly one training job."""
    jobs = load_jobs(source)
    if len(jobs) != 1:
        raise JobSpecError(
            str(source) if not isinstance(source, Mapping) else "<dict>",
            [Issue("", f"expected exactly one job document, found {len(jobs)}")],
        )
    return jobs[0]


def dump_yaml(job: TrainingJob) -> str:
    return yaml.safe_dump(job.to_dict(), sort_keys=False)
