"""What a container runs, from its image's config and the pod spec, by Kubernetes' rules:

- argv: ``command`` replaces the image's ``Entrypoint`` (and drops its ``Cmd``), ``args`` replace
  its ``Cmd``; only the pod's ``command`` / ``args`` get ``$(VAR)`` expansion;
- environment: the image's ``Env`` first, the container's on top;
- working directory: ``workingDir``, else the image's ``WorkingDir``, else ``/``;
- user: ``runAsUser`` / ``runAsGroup`` (container, then pod), else the image's ``User``
  (``uid``, ``uid:gid``, or names looked up in the image's ``/etc/passwd`` and ``/etc/group``).

A command that names the node's own interpreter (the embedded controllers' built-in containers —
the storage initializer, the TorchScript predictor — are given it in process mode) runs the
image's ``python`` instead: the host's path means nothing inside an image.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from typing import Any

from airflow_provider_training.embedded.node.oci import layers
from airflow_provider_training.embedded.node.oci.imagestore import Image
from airflow_provider_training.embedded.node.oci.references import Source
from airflow_provider_training.embedded.node.podspec import PodConfigError
from airflow_provider_training.frameworks import expand_command

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass
class ImageConfig:
    """One container's image, as the pod spec builder asks it."""

    image: Image
    source: Source

    @property
    def config(self) -> dict[str, Any]:
        return self.image.config.get("config") or {}

    def environment(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in self.config.get("Env") or []:
            key, sep, value = str(item).partition("=")
            if sep and key:
                out[key] = value
        out.setdefault("PATH", DEFAULT_PATH)
        return out

    def argv(self, container: dict[str, Any], env: dict[str, str]) -> list[str]:
        entrypoint = [str(a) for a in self.config.get("Entrypoint") or []]
        cmd = [str(a) for a in self.config.get("Cmd") or []]
        if container.get("command"):
            head = expand_command(container.get("command"), env)
            tail = expand_command(container.get("args"), env) if container.get("args") else []
        else:
            head = entrypoint
            tail = expand_command(container.get("args"), env) if container.get("args") else cmd
        if head and head[0] == sys.executable:
            head = ["python", *head[1:]]
        return head + tail

    def working_dir(self, container: dict[str, Any]) -> str:
        return str(container.get("workingDir") or self.config.get("WorkingDir") or "/")

    def with_user(self, pod: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
        """``container`` with the image's user as its ``runAsUser`` / ``runAsGroup`` where neither
        the container nor the pod sets them, so that ``security.identity`` (and its runAsNonRoot
        check) sees whom the image runs as."""
        pod_context = (pod.get("spec") or {}).get("securityContext") or {}
        context = dict(container.get("securityContext") or {})
        uid_set = context.get("runAsUser", pod_context.get("runAsUser"))
        gid_set = context.get("runAsGroup", pod_context.get("runAsGroup"))
        image_uid, image_gid = self.user()
        uid = uid_set if uid_set is not None else image_uid
        if gid_set is None:
            if uid_set is None and image_gid is not None:
                context["runAsGroup"] = image_gid
            else:
                context["runAsGroup"] = self._primary_group(int(uid)) if isinstance(uid, int) else 0
        if uid_set is None:
            context["runAsUser"] = image_uid
        out = copy.copy(container)
        out["securityContext"] = context
        return out

    def user(self) -> tuple[int, int | None]:
        """(uid, gid or None) of the image's ``User``: root when it names none."""
        text = str(self.config.get("User") or "").strip()
        if not text:
            return 0, None
        user, _, group = text.partition(":")
        uid = self._lookup(user, "etc/passwd", 2)
        gid = self._lookup(group, "etc/group", 2) if group else None
        if gid is None and not user.isdigit():
            gid = self._primary_group(uid)
        return uid, gid

    def _primary_group(self, uid: int) -> int:
        for line in (self._file("etc/passwd") or "").splitlines():
            fields = line.split(":")
            if len(fields) > 3 and fields[2] == str(uid) and fields[3].isdigit():
                return int(fields[3])
        return 0

    def _lookup(self, name: str, path: str, column: int) -> int:
        if name.isdigit():
            return int(name)
        for line in (self._file(path) or "").splitlines():
            fields = line.split(":")
            if len(fields) > column and fields[0] == name and fields[column].isdigit():
                return int(fields[column])
        raise PodConfigError(
            "CreateContainerConfigError", f'image {self.source.image}: its user "{name}" is not in the image\'s /{path}'
        )

    def _file(self, path: str) -> str | None:
        """A file of the image (the top-most layer that has it)."""
        for layer in reversed(self.image.layer_dirs):
            text = layers.read_text(layer, path)
            if text is not None:
                return text
        return None
