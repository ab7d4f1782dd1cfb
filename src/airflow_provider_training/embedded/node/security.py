"""A pod's ``securityContext`` as the kubelet applies it: who each container runs as, the
capabilities it keeps, volume ownership for ``fsGroup``, and the fields this node cannot enforce
(named in one Warning event per pod, never ignored silently).

Enforced: ``runAsUser`` / ``runAsGroup`` / ``runAsNonRoot`` (pod level, the container's win),
``supplementalGroups``, ``fsGroup`` and ``fsGroupChangePolicy`` (the group owns the pod's emptyDir,
claim, ConfigMap, Secret and projected volumes, setgid on their directories, as the kubelet's
``SetVolumeOwnership``), ``capabilities.drop``, ``capabilities.add`` within the node's default set,
``allowPrivilegeEscalation: false`` (no_new_privs). Not enforced: see ``NOT_ENFORCED``.
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded.node import privileges
from airflow_provider_training.specs.unstructured import Unstructured

# field -> why it is not enforced here (the Warning event says it)
NOT_ENFORCED = {
    "readOnlyRootFilesystem": "the root file system is the host's, and stays writable",
    "privileged": "a privileged container would reach the control plane's data directory",
    "seccompProfile": "no seccomp filter is applied",
    "seLinuxOptions": "no SELinux label is applied",
    "appArmorProfile": "no AppArmor profile is applied",
    "procMount": "/proc is the host's, with its usual masks",
    "sysctls": "sysctls are the host's",
    "seLinuxChangePolicy": "no SELinux label is applied",
}
_NOTHING_ASKED: tuple[object, ...] = (
    None,
    False,
    {},
    [],
    "Default",
    {"type": "Unconfined"},
)  # what this node does anyway
POD_ONLY = ("fsGroup", "fsGroupChangePolicy", "supplementalGroups", "supplementalGroupsPolicy", "sysctls")
_RW_MASK, _RO_MASK, _EXEC_MASK = 0o660, 0o440, 0o110


class SecurityContextError(ValueError):
    """The container must not start (kubelet's ``CreateContainerConfigError``)."""


@dataclass
class PodSecurity:
    """The pod-level outcome: its fsGroup and fsUser (for volume ownership), and the warnings."""

    fs_group: int | None = None
    fs_group_policy: str = "Always"
    fs_user: int | None = None
    warnings: list[str] = field(default_factory=list)


def _context(obj: Unstructured) -> dict[str, Any]:
    context = obj.get("securityContext")
    return context if isinstance(context, dict) else {}


def _number(context: dict[str, Any], name: str, where: str) -> int | None:
    value = context.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 2**31 - 1:
        raise SecurityContextError(f"{where}.{name}: {value!r} is not a valid user or group ID (0 to 2147483647)")
    return value


def _effective(pod: Unstructured, container: dict[str, Any], name: str, where: str) -> int | None:
    """A field the container's securityContext overrides (runAsUser, runAsGroup)."""
    mine = _number(_context(container), name, f"{where}.securityContext")
    return mine if mine is not None else _number(_context(pod.get("spec") or {}), name, "spec.securityContext")


def pod_security(pod: Unstructured) -> PodSecurity:
    spec = pod.get("spec") or {}
    context = _context(spec)
    out = PodSecurity(fs_group=_number(context, "fsGroup", "spec.securityContext"))
    policy = context.get("fsGroupChangePolicy")
    if policy is not None:
        out.fs_group_policy = str(policy)
    out.fs_user = fs_user(pod)
    for name, why in NOT_ENFORCED.items():
        if name in context and context[name] not in _NOTHING_ASKED and name != "privileged":
            out.warnings.append(f"spec.securityContext.{name} ({why})")
    if not privileges.can_switch_user() and any(
        context.get(n) is not None for n in ("runAsUser", "runAsGroup", "fsGroup", "supplementalGroups")
    ):
        out.warnings.append("spec.securityContext user and groups (the node does not run as root, so it cannot switch)")
    return out


def fs_user(pod: Unstructured) -> int | None:
    """kubelet's ``FsUserFrom``: the runAsUser every container (init ones too) runs as, if one."""
    spec = pod.get("spec") or {}
    found: int | None = None
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    for i, container in enumerate(containers):
        if not isinstance(container, dict):
            return None
        uid = _effective(pod, container, "runAsUser", f"containers[{i}]")
        if uid is None or (found is not None and uid != found):
            return None
        found = uid
    return found


def identity(pod: Unstructured, container: dict[str, Any], where: str) -> tuple[privileges.Identity, list[str]]:
    """The container's process and the fields of its securityContext that are not enforced;
    :class:`SecurityContextError` for ``runAsNonRoot`` when it would run as root (kubelet's words)."""
    pod_context = _context(pod.get("spec") or {})
    context = _context(container)
    warnings: list[str] = []
    uid = _effective(pod, container, "runAsUser", where)
    gid = _effective(pod, container, "runAsGroup", where)
    non_root = context.get("runAsNonRoot", pod_context.get("runAsNonRoot"))
    meta = pod.get("metadata") or {}
    pod_ref = f"{meta.get('name', '')}_{meta.get('namespace', '')}({meta.get('uid', '')})"
    switching = privileges.can_switch_user()
    running_as = uid if uid is not None else (os.geteuid() if not switching else 0)
    if non_root:
        if uid == 0:
            raise SecurityContextError(
                f"container's runAsUser breaks non-root policy (pod: {pod_ref!r}, container: {container.get('name')})"
            )
        if running_as == 0:
            raise SecurityContextError(
                f"container has runAsNonRoot and image will run as root (pod: {pod_ref!r}, "
                f"container: {container.get('name')})"
            )
    fs_group = _number(pod_context, "fsGroup", "spec.securityContext")
    supplemental = pod_context.get("supplementalGroups") or []
    if not isinstance(supplemental, list) or any(isinstance(g, bool) or not isinstance(g, int) for g in supplemental):
        raise SecurityContextError("spec.securityContext.supplementalGroups must be a list of group IDs")
    groups: tuple[int, ...] | None = None
    if uid is not None and gid is None:
        gid = _primary_group(uid)  # the image's user's group: here the host's /etc/passwd, else 0
    if uid is not None or gid is not None or fs_group is not None or supplemental:
        groups = tuple(dict.fromkeys([g for g in (gid, fs_group) if g is not None] + list(supplemental)))
    capabilities, cap_warnings = _capabilities(context, where)
    warnings += cap_warnings
    no_new_privs = context.get("allowPrivilegeEscalation") is False
    for name, why in NOT_ENFORCED.items():
        if name in POD_ONLY:
            continue
        value = context.get(name)
        if value not in _NOTHING_ASKED:
            warnings.append(f"{where}.securityContext.{name} ({why})")
    if not switching:
        if uid is not None or gid is not None or groups is not None:
            warnings.append(
                f"{where}.securityContext user and groups (the node does not run as root, so it cannot switch)"
            )
        return privileges.Identity(capabilities=capabilities, no_new_privs=no_new_privs), warnings
    return privileges.Identity(uid, gid, groups, capabilities, no_new_privs), warnings


def _primary_group(uid: int) -> int:
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return 0


def _capabilities(context: dict[str, Any], where: str) -> tuple[tuple[str, ...], list[str]]:
    caps = context.get("capabilities") if isinstance(context.get("capabilities"), dict) else {}
    assert isinstance(caps, dict)
    kept = list(privileges.DEFAULT)
    warnings = []

    def names(key: str) -> list[str]:
        value = caps.get(key) or []
        if not isinstance(value, list):
            raise SecurityContextError(f"{where}.securityContext.capabilities.{key} must be a list of names")
        return [str(v).upper().removeprefix("CAP_") for v in value]

    dropped = names("drop")
    if "ALL" in dropped:
        kept = []
    kept = [c for c in kept if c not in dropped]
    refused = [c for c in names("add") if c not in privileges.DEFAULT and c != "ALL"] + (
        ["ALL"] if "ALL" in names("add") else []
    )
    for name in names("add"):
        if name in privileges.DEFAULT and name not in kept and name not in dropped:
            kept.append(name)
    if refused:
        warnings.append(
            f"{where}.securityContext.capabilities.add {refused} (not granted: beyond the node's default set "
            f"{list(privileges.DEFAULT)})"
        )
    return tuple(c for c in privileges.DEFAULT if c in kept), warnings


# -- volume ownership (kubelet's SetVolumeOwnership) -------------------------------------------
def set_volume_ownership(directory: Path, fs_group: int, read_only: bool, policy: str = "Always") -> None:
    """Every file under ``directory``: group ``fs_group``, group read (and write unless
    ``read_only``); directories also setgid and group search, as the kubelet does for volumes that
    support ownership management. ``OnRootMismatch`` skips a volume whose root is already right.
    Walked through descriptors and never through a link: a container cannot redirect the change."""
    mask = _RO_MASK if read_only else _RW_MASK
    root = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(root)
        wanted = stat.S_IMODE(info.st_mode) | mask | stat.S_ISGID | _EXEC_MASK
        if policy == "OnRootMismatch" and info.st_gid == fs_group and stat.S_IMODE(info.st_mode) == wanted:
            return
        _own(root, fs_group, mask)
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(dir_fd=root):
            del dirpath
            for name in dirnames + filenames:
                try:
                    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
                except OSError:
                    continue  # gone meanwhile
                try:
                    _own(fd, fs_group, mask)
                finally:
                    os.close(fd)
    finally:
        os.close(root)


def _own(fd: int, fs_group: int, mask: int) -> None:
    info = os.fstat(fd)
    if stat.S_ISLNK(info.st_mode):
        return  # a link's own group is not worth following it for
    path = f"/proc/self/fd/{fd}"  # the opened inode itself: works on an O_PATH descriptor, follows no link
    os.chown(path, -1, fs_group)
    mode = stat.S_IMODE(info.st_mode) | mask
    if stat.S_ISDIR(info.st_mode):
        mode |= stat.S_ISGID | _EXEC_MASK
    os.chmod(path, mode)
