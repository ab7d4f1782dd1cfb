"""Lint for a TrainJob's command and args: references to variables nothing defines in the trainer
container, most often the v1 operator's names (``$(MASTER_ADDR)``, ``$RANK``) in a job moved to v2."""

from __future__ import annotations

import re
from typing import Any

from airflow_provider_training.frameworks.trainer.migrate import NEVER_SET, RENAMES, V1_ONLY
from airflow_provider_training.specs.issues import Issue
from airflow_provider_training.specs.trainer import constants as c
from airflow_provider_training.specs.trainer.models import TrainJob

_K8S = re.compile(r"\$\(([A-Z_][A-Z0-9_]*)\)")
_SHELL = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
# Every name some v1 operator injected: a shell reference to one of them is almost surely meant for it.
_OPERATOR_NAMES = set().union(*V1_ONLY.values(), *(r.keys() for r in RENAMES.values()), NEVER_SET)
# Kubernetes sets this in every container of an Indexed Job's pods.
_ALWAYS = {"JOB_COMPLETION_INDEX"}


def _escaped(text: str, start: int) -> bool:
    run = 0
    while start - run - 1 >= 0 and text[start - run - 1] == "$":
        run += 1
    return run % 2 == 1


_KIND_OF = {"torch": "PyTorchJob", "jax": "JAXJob", "xgboost": "XGBoostJob"}


def _hint(name: str, framework: str | None) -> str:
    renames = RENAMES.get(_KIND_OF.get(framework or "", ""), {})
    if name in renames:
        shown = ":".join(f"$({v})" for v in renames[name])
        return f"Trainer v2 does not set {name}; the {framework} runtime sets {shown}"
    if name in NEVER_SET:
        return NEVER_SET[name]
    if name in _OPERATOR_NAMES:
        return f"Trainer v2 does not set {name} (a Training Operator v1 variable)"
    return f"neither spec.trainer.env, the runtime nor Trainer v2 defines {name}"


def check(job: TrainJob, jobset: dict[str, Any], framework: str | None = None) -> list[Issue]:
    """Warnings for ``spec.trainer.command``/``args`` words, given the JobSet the controller builds."""
    trainer = job.spec.trainer
    if trainer is None:
        return []
    container = _trainer_container(jobset)
    if container is None:
        return []
    defined = {str(env.get("name")) for env in container.get("env") or []} | _ALWAYS
    if container.get("envFrom"):
        return []  # keys from ConfigMaps/Secrets are unknown here
    issues: list[Issue] = []
    for field, words in (("command", trainer.command or []), ("args", trainer.args or [])):
        for i, word in enumerate(words):
            path = f"spec.trainer.{field}[{i}]"
            for match in _K8S.finditer(word):
                name = match.group(1)
                if name not in defined and not _escaped(word, match.start()):
                    issues.append(
                        Issue(
                            path,
                            f"$({name}) stays literal text at run time: {_hint(name, framework)}",
                            "lint",
                            "env-reference",
                        )
                    )
            for match in _SHELL.finditer(word):
                name = match.group(1) or match.group(2)
                if name in _OPERATOR_NAMES and name not in defined and not _escaped(word, match.start()):
                    issues.append(
                        Issue(path, f"${name} is empty in the shell: {_hint(name, framework)}", "lint", "env-reference")
                    )
    return issues


def _trainer_container(jobset: dict[str, Any]) -> dict[str, Any] | None:
    for job in jobset.get("spec", {}).get("replicatedJobs") or []:
        labels = ((job.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(c.LABEL_ANCESTOR) != c.ANCESTOR_TRAINER:
            continue
        pod = (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or []:
            if container.get("name") == c.NODE:
                found: dict[str, Any] = container
                return found
    return None
