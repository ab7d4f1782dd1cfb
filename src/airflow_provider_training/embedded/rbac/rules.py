"""What a PolicyRule grants, with kube-apiserver's semantics (``rbac/v1`` evaluation helpers):
``*`` for verbs, API groups and resources, ``*/<subresource>``, ``resources: [pods/log]`` for a
subresource, ``resourceNames`` (an empty list: any name), ``nonResourceURLs`` with a trailing ``*``.

Also the escalation check's comparison (``validation.Covers``): a writer's rules cover a new role's
rules when each atomic rule (one group, resource, verb and name) is covered by one of them; what is
not is reported compacted, in ``CompactString``'s words.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_training.embedded.rbac.user import UserInfo

ALL = "*"
Rule = Mapping[str, Any]  # a PolicyRule as stored: verbs, apiGroups, resources, resourceNames, nonResourceURLs


@dataclass(frozen=True)
class Attributes:
    """What a request asks (kube-apiserver's ``authorizer.Attributes``)."""

    user: UserInfo
    verb: str
    resource_request: bool = True
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


class CompiledRule:
    """One PolicyRule, prepared for many checks (sets instead of lists, wildcards as flags)."""

    __slots__ = (
        "all_groups",
        "all_resources",
        "all_verbs",
        "groups",
        "names",
        "prefixes",
        "resources",
        "sub",
        "urls",
        "verbs",
    )

    def __init__(self, rule: Rule) -> None:
        verbs = _strings(rule.get("verbs"))
        groups = _strings(rule.get("apiGroups"))
        resources = _strings(rule.get("resources"))
        urls = _strings(rule.get("nonResourceURLs"))
        self.all_verbs = ALL in verbs
        self.all_groups = ALL in groups
        self.all_resources = ALL in resources
        self.groups = frozenset(groups)
        self.resources = frozenset(resources)
        # "*/scale": that subresource of every resource
        self.sub = frozenset(r[2:] for r in resources if r.startswith("*/") and len(r) > 2)
        self.names = frozenset(_strings(rule.get("resourceNames")))
        self.urls = frozenset(u for u in urls if not u.endswith(ALL))
        self.prefixes = tuple(u.rstrip(ALL) for u in urls if u.endswith(ALL))
        self.verbs = frozenset(verbs)

    def allows(self, a: Attributes) -> bool:
        if not (self.all_verbs or a.verb in self.verbs):
            return False
        if not a.resource_request:
            return a.path in self.urls or any(a.path.startswith(p) for p in self.prefixes)
        if not (self.all_groups or a.api_group in self.groups):
            return False
        if not self.all_resources:
            combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
            if combined not in self.resources and not (a.subresource and a.subresource in self.sub):
                return False
        return not self.names or a.name in self.names


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def compile_rules(rules: Iterable[Rule]) -> tuple[CompiledRule, ...]:
    return tuple(CompiledRule(r) for r in rules if isinstance(r, Mapping))


# -- the escalation check's comparison ---------------------------------------------------------------


def _atoms(rule: Rule) -> list[dict[str, list[str]]]:
    """``breakdownRule``: one rule per group x resource x verb (x name), and per URL x verb."""
    verbs = _strings(rule.get("verbs"))
    names = _strings(rule.get("resourceNames"))
    out: list[dict[str, list[str]]] = []
    for group in _strings(rule.get("apiGroups")):
        for resource in _strings(rule.get("resources")):
            for verb in verbs:
                base = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                out += [{**base, "resourceNames": [n]} for n in names] if names else [base]
    for url in _strings(rule.get("nonResourceURLs")):
        out += [{"nonResourceURLs": [url], "verbs": [verb]} for verb in verbs]
    return out


def _url_covers(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith(ALL) and path.startswith(owner.rstrip(ALL)))


def _covers(owner: Rule, atom: Rule) -> bool:
    """``ruleCovers``."""

    def has_all(field: str) -> bool:
        mine = set(_strings(owner.get(field)))
        return ALL in mine or set(_strings(atom.get(field))) <= mine

    owner_names, atom_names = _strings(owner.get("resourceNames")), _strings(atom.get("resourceNames"))
    names = not owner_names or (bool(atom_names) and set(atom_names) <= set(owner_names))
    urls = all(
        any(_url_covers(o, p) for o in _strings(owner.get("nonResourceURLs")))
        for p in _strings(atom.get("nonResourceURLs"))
    )
    return has_all("verbs") and has_all("apiGroups") and has_all("resources") and names and urls


def uncovered(owner: Sequence[Rule], servant: Iterable[Rule]) -> list[dict[str, list[str]]]:
    """The atomic rules of ``servant`` that no rule of ``owner`` covers (empty: covered)."""
    return [atom for rule in servant for atom in _atoms(rule) if not any(_covers(o, atom) for o in owner)]


def compact(rules: list[dict[str, list[str]]]) -> list[dict[str, list[str]]]:
    """``CompactRules``: rules of one group and resource and nothing else but verbs become one."""
    simple: dict[tuple[str, str], dict[str, list[str]]] = {}
    out: list[dict[str, list[str]]] = []
    for rule in rules:
        if set(rule) == {"apiGroups", "resources", "verbs"} and len(rule["apiGroups"]) == len(rule["resources"]) == 1:
            key = (rule["apiGroups"][0], rule["resources"][0])
            if key in simple:
                simple[key]["verbs"] = simple[key]["verbs"] + rule["verbs"]
            else:
                simple[key] = {k: list(v) for k, v in rule.items()}
        else:
            out.append(rule)
    return out + list(simple.values())


def go_quote(value: str) -> str:
    """Go's ``%q`` of a string (for the printable strings names and paths are)."""
    return json.dumps(value, ensure_ascii=False)


def go_quote_list(values: Iterable[str]) -> str:
    """Go's ``%q`` of a ``[]string``: ``["get" "list"]``."""
    return "[" + " ".join(go_quote(v) for v in values) + "]"


def compact_string(rule: Mapping[str, list[str]]) -> str:
    """``CompactString``: ``{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}``."""
    parts = [
        f"{label}:{go_quote_list(rule[field])}"
        for label, field in (
            ("APIGroups", "apiGroups"),
            ("Resources", "resources"),
            ("NonResourceURLs", "nonResourceURLs"),
            ("ResourceNames", "resourceNames"),
            ("Verbs", "verbs"),
        )
        if rule.get(field)
    ]
    return "{" + ", ".join(parts) + "}"
