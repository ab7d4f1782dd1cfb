"""The Kitfile: a strict model that reads and writes what kit reads and writes (``kitops.md`` §1, §2.3).

One module a job: ``model`` (the pydantic model, its config blob and YAML), ``yaml12`` (YAML read
with Go yaml.v3's YAML 1.2 semantics), ``validation`` (kit's validator rules), ``reference`` (the
ModelKit reference grammar that ``model.path`` and kitops share), ``errors``. The config blob is
written by the one Go ``encoding/json`` writer, ``specs/gojson.py``.

Public names::

    from airflow_provider_training.specs.kitfile import Kitfile, KitfileError, check
"""

from __future__ import annotations

from airflow_provider_training.specs.kitfile.errors import KitfileError
from airflow_provider_training.specs.kitfile.model import (
    DEFAULT_KITFILE_NAMES,
    MANIFEST_VERSION,
    Code,
    Dataset,
    Docs,
    Kitfile,
    LayerInfo,
    LayerKind,
    McpServer,
    Model,
    ModelPart,
    Package,
    Prompt,
)
from airflow_provider_training.specs.kitfile.reference import is_modelkit_reference
from airflow_provider_training.specs.kitfile.validation import PART_TYPE_RE, check, clean_path, validate
from airflow_provider_training.specs.kitfile.yaml12 import load_yaml, resolve_plain

__all__ = [
    "DEFAULT_KITFILE_NAMES",
    "MANIFEST_VERSION",
    "PART_TYPE_RE",
    "Code",
    "Dataset",
    "Docs",
    "Kitfile",
    "KitfileError",
    "LayerInfo",
    "LayerKind",
    "McpServer",
    "Model",
    "ModelPart",
    "Package",
    "Prompt",
    "check",
    "clean_path",
    "is_modelkit_reference",
    "load_yaml",
    "resolve_plain",
    "validate",
]
