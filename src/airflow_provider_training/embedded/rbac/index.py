"""The authorizer: which stored rules apply to a user in a namespace, and whether one allows a request
(kube-apiserver's ``DefaultRuleResolver`` + ``RBACAuthorizer``, preceded by its privileged-group
authorizer: ``system:masters`` may do anything).

Called once per request, so it keeps the bindings indexed by subject (user name, group, service
account) and the roles compiled, and caches the rules that apply per (user, groups, namespace). All
of it is rebuilt from the store, lazily, after any write to a Role, ClusterRole or binding (a store
listener counts those writes; nothing is rebuilt while they do not change).

``PermissiveAuthorizer`` answers every question with yes: the control plane's mode before RBAC,
kept for those who want it (``AIRFLOW_TRAINING_AUTHORIZATION=permissive``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_provider_training.embedded.rbac.rules import Attributes, CompiledRule, Rule, compile_rules
from airflow_provider_training.embedded.rbac.user import UserInfo
from airflow_provider_training.embedded.store import Store, WatchEvent
from airflow_provider_training.specs.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    RBAC_TYPES,
    ROLE_BINDINGS,
    ROLES,
)
from airflow_provider_training.specs.unstructured import Unstructured

RBAC_KEYS = frozenset(rt.key for rt in RBAC_TYPES)
RBAC = "rbac"
PERMISSIVE = "permissive"
MODES = (RBAC, PERMISSIVE)
_CACHE_LIMIT = 4096
FULL_AUTHORITY: list[dict[str, list[str]]] = [
    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
    {"nonResourceURLs": ["*"], "verbs": ["*"]},
]


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


class Authorizer(Protocol):
    mode: str

    def authorize(self, attributes: Attributes) -> Decision: ...

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Rule], list[str]]: ...

    def role_reference_rules(self, role_ref: dict[str, Any], namespace: str) -> list[Rule] | None: ...


class RoleNotFound(LookupError):
    pass


@dataclass(frozen=True)
class _Binding:
    kind: str  # RoleBinding | ClusterRoleBinding
    name: str
    namespace: str
    role_ref: tuple[str, str]  # (kind, name)
    subjects: tuple[tuple[str, str, str], ...]  # (kind, name, namespace)

    def source(self, subject: int) -> str:
        """``describeSubject`` in the binding describers' words (the ``allowed by`` reason)."""
        kind, name, namespace = self.subjects[subject]
        who = f'{kind} "{name}/{namespace or self.namespace}"' if kind == "ServiceAccount" else f'{kind} "{name}"'
        binding = f"{self.name}/{self.namespace}" if self.namespace else self.name
        return f'{self.kind} "{binding}" of {self.role_ref[0]} "{self.role_ref[1]}" to {who}'


@dataclass
class _Grants:
    rules: tuple[tuple[CompiledRule, str], ...]
    raw: list[Rule]
    errors: list[str]


@dataclass
class _Snapshot:
    """The indexed policy at one generation of the RBAC objects."""

    roles: dict[tuple[str, str], list[Rule]] = field(default_factory=dict)
    cluster_roles: dict[str, list[Rule]] = field(default_factory=dict)
    # subject key -> [(position, subject index, binding)]; ("", …) is cluster-wide
    bindings: dict[str, dict[tuple[str, ...], list[tuple[int, int, _Binding]]]] = field(default_factory=dict)
    compiled: dict[tuple[str, str, str], tuple[CompiledRule, ...]] = field(default_factory=dict)
    grants: dict[tuple[str, tuple[str, ...], str], _Grants] = field(default_factory=dict)

    def role_rules(self, kind: str, name: str, namespace: str) -> list[Rule]:
        if kind == "Role":
            found = self.roles.get((namespace, name))
            if found is None:
                raise RoleNotFound(f'role.rbac.authorization.k8s.io "{name}" not found')
            return found
        if kind == "ClusterRole":
            found = self.cluster_roles.get(name)
            if found is None:
                raise RoleNotFound(f'clusterrole.rbac.authorization.k8s.io "{name}" not found')
            return found
        raise RoleNotFound(f'unsupported role reference kind: "{kind}"')

    def compiled_rules(self, kind: str, name: str, namespace: str) -> tuple[CompiledRule, ...]:
        key = (kind, name, namespace if kind == "Role" else "")
        found = self.compiled.get(key)
        if found is None:
            found = self.compiled[key] = compile_rules(self.role_rules(kind, name, namespace))
        return found


def _subject_keys(user: UserInfo) -> list[tuple[str, ...]]:
    keys: list[tuple[str, ...]] = [("User", user.name)]
    keys += [("Group", g) for g in user.groups]
    sa = user.service_account
    if sa is not None:
        keys.append(("ServiceAccount", sa[1], sa[0]))
    return keys


def _items(value: Any) -> list[Rule]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


class RBACAuthorizer:
    mode = RBAC

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._generation = 0
        self._built = -1
        self._snapshot = _Snapshot()
        store.subscribe(self._on_event)

    def _on_event(self, event: WatchEvent) -> None:
        if event.resource in RBAC_KEYS:
            self._generation += 1

    # -- the index ----------------------------------------------------------------------------------
    def _current(self) -> _Snapshot:
        if self._built == self._generation:
            return self._snapshot
        with self._lock:
            generation = self._generation
            if self._built != generation:
                self._snapshot = self._build()
                self._built = generation
            return self._snapshot

    def _build(self) -> _Snapshot:
        snap = _Snapshot()
        for obj in self.store.list(ROLES.key).items:
            meta = obj["metadata"]
            snap.roles[(meta.get("namespace", ""), meta["name"])] = _items(obj.get("rules"))
        for obj in self.store.list(CLUSTER_ROLES.key).items:
            snap.cluster_roles[obj["metadata"]["name"]] = _items(obj.get("rules"))
        position = 0
        for rt in (CLUSTER_ROLE_BINDINGS, ROLE_BINDINGS):
            for obj in self.store.list(rt.key).items:
                binding = _binding(rt.kind, obj)
                scope = snap.bindings.setdefault(binding.namespace, {})
                for i, (kind, name, namespace) in enumerate(binding.subjects):
                    if kind == "ServiceAccount":
                        namespace = namespace or binding.namespace
                        if not namespace:
                            continue  # a ClusterRoleBinding's service account needs its namespace
                        key: tuple[str, ...] = ("ServiceAccount", name, namespace)
                    else:
                        key = (kind, name)
                    scope.setdefault(key, []).append((position, i, binding))
                position += 1
        return snap

    def _grants(self, snap: _Snapshot, user: UserInfo, namespace: str) -> _Grants:
        cache_key = (user.name, user.groups, namespace)
        found = snap.grants.get(cache_key)
        if found is not None:
            return found
        applying: dict[int, tuple[int, _Binding]] = {}
        for scope in ("", namespace) if namespace else ("",):
            index = snap.bindings.get(scope, {})
            for key in _subject_keys(user):
                for position, subject, binding in index.get(key, ()):
                    if position not in applying or subject < applying[position][0]:
                        applying[position] = (subject, binding)
        rules: list[tuple[CompiledRule, str]] = []
        raw: list[Rule] = []
        errors: list[str] = []
        for position in sorted(applying):
            subject, binding = applying[position]
            kind, name = binding.role_ref
            try:
                compiled = snap.compiled_rules(kind, name, binding.namespace)
                raw += snap.role_rules(kind, name, binding.namespace)
            except RoleNotFound as exc:
                if str(exc) not in errors:
                    errors.append(str(exc))
                continue
            source = binding.source(subject)
            rules += [(rule, source) for rule in compiled]
        grants = _Grants(tuple(rules), raw, errors)
        if len(snap.grants) >= _CACHE_LIMIT:
            snap.grants.clear()
        snap.grants[cache_key] = grants
        return grants

    # -- the questions ------------------------------------------------------------------------------
    def authorize(self, attributes: Attributes) -> Decision:
        if attributes.user.privileged:
            return Decision(True)
        grants = self._grants(self._current(), attributes.user, attributes.namespace)
        for rule, source in grants.rules:
            if rule.allows(attributes):
                return Decision(True, f"RBAC: allowed by {source}")
        return Decision(False, _reason(grants.errors))

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Rule], list[str]]:
        """Every rule that applies to ``user`` in ``namespace``, and what could not be resolved."""
        grants = self._grants(self._current(), user, namespace)
        return list(grants.raw), list(grants.errors)

    def role_reference_rules(self, role_ref: dict[str, Any], namespace: str) -> list[Rule] | None:
        """The rules a binding's roleRef names (None: no such role)."""
        try:
            return self._current().role_rules(str(role_ref.get("kind")), str(role_ref.get("name")), namespace)
        except RoleNotFound:
            return None


def _reason(errors: list[str]) -> str:
    if not errors:
        return ""
    return "RBAC: " + (errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")


def _binding(kind: str, obj: Unstructured) -> _Binding:
    meta = obj["metadata"]
    ref = obj.get("roleRef") or {}
    subjects = tuple(
        (str(s.get("kind", "")), str(s.get("name", "")), str(s.get("namespace", "") or ""))
        for s in obj.get("subjects") or []
        if isinstance(s, dict)
    )
    return _Binding(
        kind, meta["name"], meta.get("namespace", ""), (str(ref.get("kind", "")), str(ref.get("name", ""))), subjects
    )


class PermissiveAuthorizer:
    """Every authenticated request is allowed (``--authorization-mode=AlwaysAllow``)."""

    mode = PERMISSIVE

    def authorize(self, attributes: Attributes) -> Decision:
        return Decision(True)

    def rules_for(self, user: UserInfo, namespace: str) -> tuple[list[Rule], list[str]]:
        return [dict(r) for r in FULL_AUTHORITY], []

    def role_reference_rules(self, role_ref: dict[str, Any], namespace: str) -> list[Rule] | None:
        return None
