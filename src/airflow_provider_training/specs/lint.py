"""Warnings about likely mistakes that a cluster accepts (level ``lint``), from the spec alone.

The mistakes come from what users paste (the seed examples' ``COMMANDS.md``, kept in ``tests/data/seed/``). Checks that need
the environment the operator injects live in :mod:`airflow_provider_training.validation`.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Iterator
from typing import Any

from airflow_provider_training.specs.issues import Issue, index, join
from airflow_provider_training.specs.pod import Container, PodSpec

KIT_IMAGE = re.compile(r"^(ghcr\.io/kitops-ml/)kit(?=[:@]|$)")


def _warn(path: str, message: str, rule: str) -> Issue:
    return Issue(path, message, "lint", rule)


def pods(job_dict_path: str, templates: dict[str, PodSpec | None]) -> Iterator[tuple[str, PodSpec]]:
    for key, pod in templates.items():
        if pod is not None:
            yield f"{job_dict_path}[{key}].template.spec" if key else job_dict_path, pod


def command_lines(container: Container) -> list[str]:
    """The container's command and args, plus each shell script passed with ``-c``."""
    return [*(container.command or []), *(container.args or [])]


def check_pod(pod: PodSpec, path: str, *, restart_policy_owned: bool) -> list[Issue]:
    issues: list[Issue] = []
    if restart_policy_owned and pod.restart_policy:
        issues.append(
            _warn(
                join(path, "restartPolicy"),
                f'"{pod.restart_policy}" will be overwritten by the replica\'s restartPolicy; set '
                "restartPolicy on the replica spec instead (the operator emits SetPodTemplateRestartPolicy)",
                "template-restart-policy",
            )
        )
    for i, container in enumerate([*pod.containers, *(pod.init_containers or [])]):
        group = "containers" if i < len(pod.containers) else "initContainers"
        cpath = index(join(path, group), i if group == "containers" else i - len(pod.containers))
        issues += check_container(container, cpath, pod)
    return issues


def check_container(container: Container, path: str, pod: PodSpec) -> list[Issue]:
    issues: list[Issue] = []
    words = command_lines(container)
    text = "\n".join(words)
    if "torch.distributed.launch" in text:
        issues.append(
            _warn(
                join(path, "command"),
                "python -m torch.distributed.launch is deprecated; use torchrun (same flags, and it reads "
                "the PET_* variables the operator sets)",
                "deprecated-launcher",
            )
        )
    if _kit_password_on_command_line(words):
        issues.append(
            _warn(
                join(path, "command"),
                "kit login with -p/--password puts the registry password on the command line, visible in "
                "process listings; pipe it with --password-stdin from a Secret-backed env var, or use "
                "ModelKitPushOperator with a registry connection",
                "secret-on-command-line",
            )
        )
    if container.image and KIT_IMAGE.match(container.image):
        fixed = KIT_IMAGE.sub(r"\1kitops", container.image)
        issues.append(
            _warn(
                join(path, "image"),
                f'"{container.image}": KitOps publishes its image as ghcr.io/kitops-ml/kitops; use "{fixed}"',
                "kit-image",
            )
        )
    if re.search(r"(^|[\s;&|(])kubectl\s", text) and not pod.service_account_name:
        issues.append(
            _warn(
                join(path, "command"),
                "calls kubectl inside the pod: the image needs a kubectl binary and the pod a service "
                "account allowed to read the job (serviceAccountName is not set); in Airflow, wait with "
                "the training operator or TrainingJobSensor instead",
                "kubectl-in-pod",
            )
        )
    return issues


def _kit_password_on_command_line(words: list[str]) -> bool:
    """``kit login ... -p/--password`` in the exec form (the words are the tokens) or in a shell line."""
    if _login_with_password(words):
        return True
    for word in words:
        # shlex only removes characters (quotes, escapes, comments): a line without "kit" and "login"
        # as subsequences cannot yield those tokens, and most lines are not worth tokenizing
        if not (_subsequence("kit", word) and _subsequence("login", word)):
            continue
        for line in word.splitlines():
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError:
                tokens = line.split()
            if _login_with_password(tokens):
                return True
    return False


def _login_with_password(tokens: list[str]) -> bool:
    return any(
        token == "kit"
        and tokens[i + 1 : i + 2] == ["login"]
        and any(t in ("-p", "--password") or t.startswith("--password=") for t in tokens[i + 2 :])
        for i, token in enumerate(tokens)
    )


def _subsequence(wanted: str, text: str) -> bool:
    """Whether ``wanted``'s characters occur in ``text`` in order (not necessarily together)."""
    rest = iter(text)
    return all(char in rest for char in wanted)


def unknown_field(dotted: str, schema: dict[str, Any]) -> Issue:
    """Warn about a field the schema does not know, suggesting where it belongs if we can tell."""
    hint = suggest(dotted, schema)
    message = "unknown field: a cluster refuses it under strict validation (kubectl's default) and drops it otherwise"
    if hint:
        message += f"; did you mean {hint}?"
    return _warn(dotted, message, "unknown-field")


def _schema_at(schema: dict[str, Any], parts: list[str]) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    for part in parts:
        if node is None:
            return None
        name = re.sub(r"\[\d+\]$", "", part)
        props = node.get("properties", {})
        if name in props:
            node = props[name]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
        if part.endswith("]") and node is not None:
            node = node.get("items", node)
    return node


def suggest(dotted: str, schema: dict[str, Any]) -> str | None:
    """Where a misplaced field belongs: the same name up to two levels below its parent, else a close spelling."""
    parts = dotted.split(".")
    parent_parts, field = parts[:-1], re.sub(r"\[\d+\]$", "", parts[-1])
    parent = _schema_at(schema, parent_parts)
    if parent is None:
        return None
    frontier: list[tuple[list[str], dict[str, Any]]] = [([], parent)]
    for _depth in range(2):
        deeper: list[tuple[list[str], dict[str, Any]]] = []
        for prefix, node in frontier:
            for name, sub in node.get("properties", {}).items():
                deeper.append(([*prefix, name], sub))
        for path, _sub in deeper:
            if len(path) > 1 and path[-1] == field:
                return ".".join([*parent_parts, *path])
        frontier = deeper
    close = difflib.get_close_matches(field, list(parent.get("properties", {})), n=1, cutoff=0.75)
    return ".".join([*parent_parts, close[0]]) if close else None
