"""What the API server checks beyond :mod:`airflow_provider_training.specs.schema` for these CRDs.

The Trainer and JobSet CRDs use value constraints (``enum``, ``maxLength``, ``maxItems``,
``minimum``, ``minProperties`` …), CRD defaults the controller depends on (``runtimeRef.kind``,
``managedBy``, the MPI policy) and CEL rules (``x-kubernetes-validations``: name format and length,
immutable fields, one mlPolicy …). The rules are evaluated with ``cel-python`` exactly as written
in the vendored CRDs, so their messages are the CRD's own; transition rules (``oldSelf``) run only
on updates, where the old value can be correlated, as the API server does.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from airflow_provider_training.specs.issues import Issue, index, join

# --- defaults ----------------------------------------------------------------------------------------


def with_defaults(value: Any, schema: dict[str, Any], *, in_place: bool = False) -> Any:
    """A copy of ``value`` with the schema's ``default``s filled in where a field is absent.

    Defaults apply inside objects that exist (the API server never creates a parent to default a
    child), and are themselves defaulted. ``in_place`` fills ``value`` itself, for a caller that
    holds the only reference to a tree it just built (the schema check's pruned copy).
    """
    return _default(value if in_place else copy.deepcopy(value), schema)


def _default(value: Any, schema: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        plan = _plan(schema)
        for key in [key for key in value if key in plan.deep]:
            if value[key] is not None:
                value[key] = _default(value[key], plan.properties[key])
        for key, sub in plan.own:  # the absent ones, in the schema's order
            if key not in value:
                value[key] = _default(copy.deepcopy(sub["default"]), sub)
        if plan.additional is not None:
            for key in value:
                if key not in plan.properties and value[key] is not None:
                    value[key] = _default(value[key], plan.additional)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict) and _plan(items).below:
            return [_default(item, items) for item in value]
    return value


@dataclass(frozen=True)
class _Plan:
    """Where defaults are, under one schema node: walking every property of a pod spec for each
    object, most of them without a default anywhere below, was most of the defaulting."""

    schema: dict[str, Any]
    below: bool  # a default at or below this node
    properties: dict[str, Any]
    own: list[tuple[str, dict[str, Any]]]  # properties with a default, in the schema's order
    deep: frozenset[str]  # properties with a default at or below them
    additional: dict[str, Any] | None  # additionalProperties, when defaults are below it


_PLANS: dict[int, _Plan] = {}  # by id; the plan keeps its schema, so the id stays the schema's


def _plan(schema: dict[str, Any]) -> _Plan:
    known = _PLANS.get(id(schema))
    if known is not None and known.schema is schema:
        return known
    properties: dict[str, Any] = schema.get("properties", {})
    own = [(key, sub) for key, sub in properties.items() if "default" in sub]
    # provisional answer for a schema that contains itself
    _PLANS[id(schema)] = _Plan(schema, True, properties, own, frozenset(properties), None)
    deep = frozenset(key for key, sub in properties.items() if _plan(sub).below)
    additional = schema.get("additionalProperties")
    extra = additional if isinstance(additional, dict) and _plan(additional).below else None
    items = schema.get("items")
    below = "default" in schema or bool(own or deep or extra) or (isinstance(items, dict) and _plan(items).below)
    plan = _PLANS[id(schema)] = _Plan(schema, below, properties, own, deep, extra)
    return plan


# --- value constraints -------------------------------------------------------------------------------


def _issue(path: str, message: str, rule: str = "schema") -> Issue:
    return Issue(path, message, "cluster", rule)


def _shown(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)


def constraints(value: Any, schema: dict[str, Any], path: str = "") -> list[Issue]:
    """``enum``, length, item-count, range and property-count limits, with the API server's wording."""
    issues: list[Issue] = []
    _constrain(value, schema, path, issues)
    return issues


def _constrain(value: Any, schema: dict[str, Any], path: str, issues: list[Issue]) -> None:
    if value is None:
        return
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        shown = ", ".join(_shown(v) for v in enum)
        issues.append(_issue(path, f"Unsupported value: {_shown(value)}: supported values: {shown}"))
    if isinstance(value, str) and not schema.get("x-kubernetes-int-or-string"):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            issues.append(_issue(path, f"Too long: may not be more than {schema['maxLength']} bytes"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            issues.append(
                _issue(path, f'Invalid value: "{value}": should be at least {schema["minLength"]} chars long')
            )
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            issues.append(
                _issue(path, f"Invalid value: {value}: should be greater than or equal to {schema['minimum']}")
            )
        if "maximum" in schema and value > schema["maximum"]:
            issues.append(_issue(path, f"Invalid value: {value}: should be less than or equal to {schema['maximum']}"))
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            issues.append(_issue(path, f"Too many: {len(value)}: must have at most {schema['maxItems']} items"))
        if "minItems" in schema and len(value) < schema["minItems"]:
            issues.append(_issue(path, f"Invalid value: {len(value)}: should have at least {schema['minItems']} items"))
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _constrain(item, items, index(path, i), issues)
    if isinstance(value, dict):
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            issues.append(
                _issue(path, f"Invalid value: {len(value)}: should have at least {schema['minProperties']} properties")
            )
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            issues.append(
                _issue(path, f"Too many: {len(value)}: must have at most {schema['maxProperties']} properties")
            )
        properties: dict[str, Any] = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                _constrain(item, properties[key], join(path, key), issues)
            elif isinstance(additional, dict):
                _constrain(item, additional, index(path, key), issues)


# --- CEL rules ---------------------------------------------------------------------------------------

_MISSING = object()


def cel_rules(value: Any, schema: dict[str, Any], old: Any = _MISSING, path: str = "") -> list[Issue]:
    """Evaluate every ``x-kubernetes-validations`` rule that applies to ``value``.

    ``old`` is the stored object on an update (omit it on create); rules that mention ``oldSelf``
    run only where an old value exists at the same place.
    """
    issues: list[Issue] = []
    _cel(value, schema, None if old is _MISSING else old, old is not _MISSING, path, issues)
    return issues


def _cel(value: Any, schema: dict[str, Any], old: Any, has_old: bool, path: str, issues: list[Issue]) -> None:
    if value is None or not _has_rules(id(schema), schema):
        return
    converted: dict[Any, Any] = {}  # self and oldSelf as the rules here read them, shared
    for rule in schema.get("x-kubernetes-validations", []):
        text = rule.get("rule", "")
        transition = "oldSelf" in text
        if transition and (not has_old or old is None):
            continue
        if _evaluate(text, value, old if transition else None, converted) is False:
            message = rule.get("message") or f"failed rule: {text}"
            issues.append(
                _issue(
                    join(path, rule["fieldPath"].lstrip(".")) if rule.get("fieldPath") else path,
                    f'Invalid value: "{_cel_type(value)}": {message}',
                    "cel",
                )
            )
    if isinstance(value, dict):
        properties: dict[str, Any] = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key) if key in properties else additional if isinstance(additional, dict) else None
            if sub is None:
                continue
            old_item = old.get(key) if has_old and isinstance(old, dict) else None
            child = join(path, key) if key in properties else index(path, key)
            _cel(item, sub, old_item, has_old and old_item is not None, child, issues)
    elif isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return
        keys = schema.get("x-kubernetes-list-map-keys") if schema.get("x-kubernetes-list-type") == "map" else None
        for i, item in enumerate(value):
            old_item = _correlate(item, old, keys) if has_old and keys else None
            _cel(item, items, old_item, old_item is not None, index(path, i), issues)


def _correlate(item: Any, old: Any, keys: list[str]) -> Any:
    if not isinstance(item, dict) or not isinstance(old, list):
        return None
    for candidate in old:
        if isinstance(candidate, dict) and all(candidate.get(k) == item.get(k) for k in keys):
            return candidate
    return None


def _cel_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


_RULE_CACHE: dict[int, bool] = {}


def _has_rules(key: int, schema: dict[str, Any]) -> bool:
    """Whether this schema node or anything below it carries CEL rules (memoised per node)."""
    known = _RULE_CACHE.get(key)
    if known is not None:
        return known
    found = bool(schema.get("x-kubernetes-validations"))
    if not found:
        children = list(schema.get("properties", {}).values())
        for extra in ("items", "additionalProperties"):
            if isinstance(schema.get(extra), dict):
                children.append(schema[extra])
        found = any(_has_rules(id(child), child) for child in children)
    _RULE_CACHE[key] = found
    return found


# Rules with a macro go through cel-python's interpreter; the rest through its transpiler (Python
# code, 3-4 times faster to run). The transpiler of cel-python 0.5 gets macros wrong (``has()``
# yields a Python bool that ``exists()`` cannot combine), so it never sees one;
# ``tests/trainer/test_cel.py`` holds both ways to the interpreter on every vendored rule.
_MACRO = re.compile(r"\b(?:has|all|exists|exists_one|map|filter|dyn)\s*\(")


@cache
def _program(rule: str) -> Callable[[dict[str, Any]], Any]:
    """The rule, ready to evaluate with a context (``self``, ``oldSelf``), made once per rule."""
    import celpy  # imported lazily: building the CEL grammar takes a noticeable fraction of a second
    from celpy import evaluation

    _transpiler_parser()
    if _MACRO.search(rule):
        env = celpy.Environment()
        runner = env.program(env.compile(rule))
        ast, base = runner.ast, runner.new_activation()
        # the activation (types, functions) made once: making one per evaluation was half of the
        # interpreter's time; each evaluation works on a clone of it
        return lambda context: evaluation.Evaluator(ast, activation=base).evaluate(context)
    env = celpy.Environment(runner_class=celpy.CompiledRunner)
    compiled = env.program(env.compile(rule))
    assert isinstance(compiled, celpy.CompiledRunner)
    transpiler = compiled.tp
    functions = vars(evaluation)

    def run(context: dict[str, Any]) -> Any:
        # ``CompiledRunner.evaluate`` binds the activation in celpy.evaluation's own globals (two
        # threads admitting objects would read each other's ``self``) and logs every rule that does
        # not apply to a shape as an "Internal error"; this runs the same code in a scope of its own.
        scope = {**functions, "base_activation": _Variables(transpiler.base_activation, context)}
        exec(transpiler.executable_code, scope)
        return scope["CEL"]

    return run


class _Variables:
    """The activation transpiled code reads ``self`` and ``oldSelf`` from, as plain attributes:
    celpy's ``Activation`` resolves each through its chain of name containers and logs it, two
    thirds of a short rule's time. Anything else (a name the context lacks included) is looked up
    in celpy's own activation, made only then, so it answers or fails exactly as before."""

    def __init__(self, base: Any, context: dict[str, Any]) -> None:
        self.__dict__.update(context)
        self._base, self._context = base, context

    def __getattr__(self, name: str) -> Any:
        activation = self._base.clone()
        activation.identifiers.load_values(self._context)
        return getattr(activation, name)


def _transpiler_parser() -> None:
    """cel-python keeps one parser per process, built for the first Environment's runner; the
    transpiler needs trees of its own class (which the interpreter reads as well)."""
    from celpy import celparser, evaluation

    parser = celparser.CELParser.CEL_PARSER
    if parser is None or parser.options.tree_class is not evaluation.TranspilerTree:
        celparser.CELParser.CEL_PARSER = None
        celparser.CELParser(tree_class=evaluation.TranspilerTree)


# Rule results by (rule, self, oldSelf): a rule is a pure function of its values, and documents
# checked together repeat them (every runtime ``migrate`` generates carries the same JobSet
# template). Keyed by a digest of the values' repr (which tells 1, 1.0, "1" and True apart).
_RESULTS: dict[bytes, bool | None] = {}
_RESULTS_MAX = 4096

# A use of ``self`` or ``oldSelf`` and the field names after it; a trailing ``(`` makes the last
# name a method (``self.metadata.name.matches(...)`` reads ``metadata.name``).
_USE = re.compile(r"(?<!\w)(self|oldSelf)(?!\w)((?:\s*\.\s*[A-Za-z_]\w*)*)(\s*\()?")
_Paths = frozenset[tuple[str, ...]] | None  # None: the whole value


@cache
def _reads(rule: str) -> dict[str, _Paths]:
    """The fields of ``self`` and ``oldSelf`` a rule reads: a rule on a whole TrainJob that reads
    only ``self.metadata.name`` is evaluated (and remembered) on ``{metadata: {name}}``, not on the
    document. A path may be longer than needed, never shorter: whatever follows a path (an index,
    a method, a macro) reads inside the subtree the path keeps whole; any other use keeps it all."""
    paths: dict[str, set[tuple[str, ...]] | None] = {"self": set(), "oldSelf": set()}
    for match in _USE.finditer(rule):
        names = tuple(name.strip() for name in match.group(2).split(".")[1:])
        if match.group(3):
            names = names[:-1]
        known = paths[match.group(1)]
        if not names or known is None:
            paths[match.group(1)] = None
        else:
            known.add(names)
    return {role: None if found is None else frozenset(found) for role, found in paths.items()}


def _project(value: Any, paths: frozenset[tuple[str, ...]]) -> Any:
    """``value`` with only the fields on ``paths`` (each kept whole where its path ends, or where
    the value stops being an object); keys in the value's order."""
    if not isinstance(value, dict) or () in paths:
        return value
    below: dict[str, set[tuple[str, ...]]] = {}
    for path in paths:
        below.setdefault(path[0], set()).add(path[1:])
    return {key: _project(item, frozenset(below[key])) for key, item in value.items() if key in below}


def _view(role: str, value: Any, paths: _Paths, converted: dict[Any, Any]) -> list[Any]:
    """[the value the rule sees, its repr], shared by the rules at one place that read the same."""
    key = (role, paths)
    if key not in converted:
        seen = value if paths is None else _project(value, paths)
        converted[key] = [seen, repr(seen).encode("utf-8", "surrogatepass")]
    view: list[Any] = converted[key]
    return view


def _evaluate(rule: str, value: Any, old: Any, converted: dict[Any, Any]) -> bool | None:
    """True / False, or None when the rule cannot be evaluated (a field it reads is absent).

    ``converted`` holds what the rules at one place share: the values they read, their repr and
    their CEL form."""
    reads = _reads(rule)
    views = [_view("self", value, reads["self"], converted)]
    if old is not None:
        views.append(_view("oldSelf", old, reads["oldSelf"], converted))
    key = hashlib.blake2b(digest_size=20)
    for part in (rule.encode("utf-8", "surrogatepass"), *(view[1] for view in views)):
        key.update(len(part).to_bytes(8, "big") + part)
    digest = key.digest()
    if digest in _RESULTS:
        return _RESULTS[digest]
    result = _evaluate_uncached(rule, views)
    if len(_RESULTS) >= _RESULTS_MAX:
        _RESULTS.clear()
    _RESULTS[digest] = result
    return result


def _evaluate_uncached(rule: str, views: list[list[Any]]) -> bool | None:
    import celpy

    activation = {}
    for role, view in zip(("self", "oldSelf"), views, strict=False):
        if len(view) < 3:  # the CEL form, made once per view
            view.append(celpy.json_to_cel(view[0]))
        activation[role] = view[2]
    try:
        result = _program(rule)(activation)
    except Exception:  # CELEvalError and friends: the rule does not apply to this shape
        return None
    if isinstance(result, celpy.CELEvalError):
        return None
    return bool(result)
