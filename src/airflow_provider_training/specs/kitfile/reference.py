"""The ModelKit reference grammar (``kitops.md`` §3.3), the one both a Kitfile (``model.path``,
``datasets[].remotePath``, §1.5) and kitops (pack, push, pull, unpack) parse with.

Registry naming rules on top of the grammar (TCR's, §7) are kitops' (``kitops/reference.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DEFAULT_REGISTRY = "localhost"
DEFAULT_TAG = "latest"

# oras' component regex ``[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*`` with the empty separator dropped
# (it only joins two runs of letters into one): the same names, but Python's backtracking matcher
# took exponential time on it ("a" * 30 + "A": minutes), where Go's RE2 is linear.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPO_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG_RE = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST_RE = re.compile(r"^sha256:[a-f0-9]{64}$")
_HOST_RE = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$")
_REFERENCE_HINT = re.compile(r"[:@]")


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


def parse(ref: str, *, default_tag: str = "") -> Reference:
    """Parse ``[registry/]repository[:tag][@digest][,tag2,...]`` like kit does.

    The first segment is a registry only when it contains ``.`` or ``:`` (or is ``localhost``);
    otherwise ``localhost`` is assumed. A tag before ``@`` is kept for display but the digest wins.
    """
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
                f"invalid digest {digest!r} in reference {ref!r} (expected sha256:<64 hex characters>)"
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
        raise ReferenceError(f"invalid registry {registry!r} in reference {ref!r}")
    if not _REPO_RE.match(repository):
        raise ReferenceError(
            f"invalid repository {repository!r} in reference {ref!r}: use lowercase letters, digits "
            "and . _ - separators, starting and ending with a letter or digit"
        )
    for t in (tag, *extra_tags):
        if t and not _TAG_RE.match(t):
            raise ReferenceError(
                f"invalid tag {t!r} in reference {ref!r}: up to 128 of [A-Za-z0-9_.-], not starting with . or -"
            )
    if not tag and not digest:
        tag = default_tag
    return Reference(registry, repository, tag, digest, extra_tags)


def is_modelkit_reference(path: str) -> bool:
    """kit's ``IsModelKitReference``: contains ``:`` or ``@`` and parses as a reference (§1.5)."""
    if not _REFERENCE_HINT.search(path) or "://" in path:
        return False
    try:
        parse(path)
    except ReferenceError:
        return False
    return True
