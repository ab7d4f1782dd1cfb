"""ModelKit references as kitops uses them: kit's grammar (``specs/kitfile/reference.py``,
``kitops.md`` §3.3) and, before any network call, Tencent Container Registry's naming rules (§7)."""

from __future__ import annotations

import re

from airflow_provider_training.specs.kitfile import reference as grammar
from airflow_provider_training.specs.kitfile.reference import DEFAULT_REGISTRY, DEFAULT_TAG, Reference, ReferenceError

__all__ = [
    "DEFAULT_REGISTRY",
    "DEFAULT_TAG",
    "TCR_ENTERPRISE_SUFFIX",
    "TCR_PERSONAL_HOST",
    "Reference",
    "ReferenceError",
    "check_tcr_rules",
    "is_tcr_host",
    "parse",
]

TCR_PERSONAL_HOST = "ccr.ccs.tencentyun.com"
TCR_ENTERPRISE_SUFFIX = ".tencentcloudcr.com"

_TCR_NAMESPACE_RE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$")
_TCR_REPO_RE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")


def is_tcr_host(host: str) -> bool:
    h = host.split(":", 1)[0].lower()
    return h == TCR_PERSONAL_HOST or h.endswith(TCR_ENTERPRISE_SUFFIX)


def parse(ref: str, *, default_tag: str = "", check_tcr: bool = True) -> Reference:
    """:func:`~airflow_provider_training.specs.kitfile.reference.parse` of ``ref`` without the white
    space around it (as typed or templated), then TCR's rules when ``check_tcr`` and the registry is TCR's."""
    result = grammar.parse(ref.strip(), default_tag=default_tag)
    if check_tcr:
        check_tcr_rules(result, ref)
    return result


def check_tcr_rules(ref: Reference, original: str | None = None) -> None:
    """TCR's naming rules, checked before any network call (``kitops.md`` §7)."""
    shown = original or str(ref)
    host = ref.registry.split(":", 1)[0].lower()
    if host == TCR_PERSONAL_HOST:
        parts = ref.repository.split("/")
        if len(parts) != 2:
            raise ReferenceError(
                f"TCR personal edition needs exactly <namespace>/<name> after {TCR_PERSONAL_HOST}, got "
                f"{ref.repository!r} in {shown!r} (e.g. {TCR_PERSONAL_HOST}/ml-models/mnist-model:v1)"
            )
    elif host.endswith(TCR_ENTERPRISE_SUFFIX):
        if "/" not in ref.repository:
            raise ReferenceError(
                f"TCR enterprise references need <namespace>/<repository>, got {ref.repository!r} in {shown!r}"
            )
        namespace, repo = ref.repository.split("/", 1)
        if not (2 <= len(namespace) <= 30 and _TCR_NAMESPACE_RE.match(namespace)):
            raise ReferenceError(
                f"TCR namespace {namespace!r} in {shown!r} must be 2-30 characters of lowercase letters, "
                "digits and . _ - (no leading, trailing or consecutive separators)"
            )
        if not (2 < len(repo) < 245 and _TCR_REPO_RE.match(repo)):
            raise ReferenceError(
                f"TCR repository {repo!r} in {shown!r} must be 3-244 characters of lowercase letters, digits and . _ -"
            )
