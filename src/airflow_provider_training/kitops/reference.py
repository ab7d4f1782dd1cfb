"""ModelKit references (``kitops.md`` §3.3) and Tencent Container Registry naming rules (§7)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DEFAULT_REGISTRY = "localhost"
DEFAULT_TAG = "latest"
TCR_PERSONAL_HOST = "ccr.ccs.tencentyun.com"
TCR_ENTERPRISE_SUFFIX = ".tencentcloudcr.com"

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*"
_REPO_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG_RE = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST_RE = re.compile(r"^sha256:[a-f0-9]{64}$")
_HOST_RE = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$")
_TCR_NAMESPACE_RE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$")
_TCR_REPO_RE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")


class ReferenceError(ValueError):
    """A reference that cannot be used; the message quotes it and says how to fix it."""


@dataclass(frozen=True)
class Reference:
    registry: str
    repository: str
    tag: str = ""
    digest: str = ""
    extra_tags: tuple[str, ...] = field(default=(), compare=False)

    @property
    def namespace(self) -> str:
        return self.repository.rsplit("/", 1)[0] if "/" in self.repository else ""

    @property
    def name(self) -> str:
        return self.repository.rsplit("/", 1)[-1]

    @property
    def repo_key(self) -> str:
        """``<registry>/<repository>``: the key of this repository in kit's local store."""
        return f"{self.registry}/{self.repository}"

    @property
    def target(self) -> str:
        """What to ask the registry for: the digest when pinned, else the tag."""
        return self.digest or self.tag or DEFAULT_TAG

    def with_tag(self, tag: str) -> Reference:
        return Reference(self.registry, self.repository, tag, "")

    def with_digest(self, digest: str) -> Reference:
        return Reference(self.registry, self.repository, self.tag, digest)

    def __str__(self) -> str:
        out = self.repo_key
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out

    @property
    def is_tcr(self) -> bool:
        return is_tcr_host(self.registry)


def is_tcr_host(host: str) -> bool:
    h = host.split(":", 1)[0].lower()
    return h == TCR_PERSONAL_HOST or h.endswith(TCR_ENTERPRISE_SUFFIX)


def parse(ref: str, *, default_tag: str = "", check_tcr: bool = True) -> Reference:
    """Parse ``[registry/]repository[:tag][@digest][,tag2,...]`` like kit does.

    The first segment is a registry only when it contains ``.`` or ``:`` (or is ``localhost``);
    otherwise ``localhost`` is assumed. A tag before ``@`` is kept for display but the digest wins.
    """
    original = ref
    ref = ref.strip()
    if not ref:
        raise ReferenceError("empty ModelKit reference (expected registry/namespace/repo:tag)")
    head, *extra = ref.split(",")
    extra_tags = tuple(t.strip() for t in extra if t.strip())
    if _DIGEST_RE.match(head):
        return Reference(DEFAULT_REGISTRY, "_", "", head)
    digest = ""
    if "@" in head:
        head, digest = head.split("@", 1)
        if not _DIGEST_RE.match(digest):
            raise ReferenceError(
                f"invalid digest {digest!r} in reference {original!r} (expected sha256:<64 hex characters>)"
            )
    tag = ""
    slash = head.rfind("/")
    colon = head.rfind(":")
    if colon > slash:
        head, tag = head[:colon], head[colon + 1 :]
    parts = head.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        registry, repository = parts[0], "/".join(parts[1:])
    else:
        registry, repository = DEFAULT_REGISTRY, head
    if not _HOST_RE.match(registry):
        raise ReferenceError(f"invalid registry {registry!r} in reference {original!r}")
    if not _REPO_RE.match(repository):
        raise ReferenceError(
            f"invalid repository {repository!r} in reference {original!r}: use lowercase letters, digits "
            "and . _ - separators, starting and ending with a letter or digit"
        )
    for t in (tag, *extra_tags):
        if t and not _TAG_RE.match(t):
            raise ReferenceError(
                f"invalid tag {t!r} in reference {original!r}: up to 128 of [A-Za-z0-9_.-], not starting with . or -"
            )
    if not tag and not digest:
        tag = default_tag
    result = Reference(registry, repository, tag, digest, extra_tags)
    if check_tcr:
        check_tcr_rules(result, original)
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
