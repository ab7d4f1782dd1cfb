"""Base model for Kubernetes objects: camelCase on the wire, unknown fields kept verbatim."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class KubeModel(BaseModel):
    """A Kubernetes object or part of one.

    ``extra="allow"`` keeps every field this project does not interpret (affinity, tolerations,
    securityContext…) so a loaded document dumps back to what the user wrote. Dump with
    :meth:`to_dict`, which leaves out what was never set instead of inventing defaults.
    """

    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        alias_generator=to_camel,
        serialize_by_alias=True,
    )

    def to_dict(self) -> dict[str, Any]:
        dumped: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return dumped
