"""Admission's call into the canonicaliser (``embedded/canonical.py``): built-in objects are stored
in kube-apiserver's form; a value that is not a quantity where one belongs is refused as the
server's decoder refuses it (400, ``… cannot be handled as a Pod: quantities must match …``)."""

from __future__ import annotations

from airflow_provider_training.embedded import canonical
from airflow_provider_training.embedded.apiserver.errors import bad_request
from airflow_provider_training.embedded.resources import ResourceType
from airflow_provider_training.specs.quantity import QUANTITY_ERROR
from airflow_provider_training.specs.unstructured import Unstructured


def canonical_form(rt: ResourceType, obj: Unstructured, *, new: bool, automount: bool = True) -> None:
    if rt.group not in ("", "batch"):
        return  # custom resources keep what the user wrote
    problems: canonical.Problems = []
    canonical.canonicalize(rt.key, obj, problems, new=new, automount=automount)
    if problems:
        field, value = problems[0]
        raise bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {QUANTITY_ERROR} '
            f"({field}: {value!r})"
        )
