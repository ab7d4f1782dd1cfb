"""``airflow-training migrate``: print the Kubeflow Trainer v2 equivalent of Training Operator v1 jobs."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from airflow_provider_training.cli.files import add_filename_option, no_documents, source


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "migrate",
        help="print the Trainer v2 TrainJob (and the runtime it needs) for a v1 training job",
        description=(
            "Read PyTorchJob/TFJob/MPIJob/XGBoostJob/PaddleJob/MXJob/JAXJob documents and print, for each, the "
            "equivalent Kubeflow Trainer v2.3.0 TrainJob, preceded by a generated TrainingRuntime when the default "
            "ClusterTrainingRuntimes cannot carry the pod template. Comments on top say, field by field, what was "
            "mapped, what changed meaning and what cannot be carried over. Nothing is applied. Exit status 1 if "
            "a document is not a valid v1 training job."
        ),
    )
    add_filename_option(parser)
    parser.add_argument(
        "--check",
        action="store_true",
        help="also run the v1 job and the TrainJob on a temporary embedded control plane (a probe replaces their "
        "command) and compare what the replicas saw: nodes, ranks, processes per node, environment (PyTorchJob, "
        "JAXJob, XGBoostJob; MPIJob: the launcher's hosts and slots). TFJob, PaddleJob and MXJob have no Trainer "
        "v2 plugin: reported as different, with the reason, without running",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        return _run(args, stack)


def _run(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    from airflow_provider_training.frameworks.trainer.migrate import migrate
    from airflow_provider_training.specs.kinds import KINDS
    from airflow_provider_training.specs.loader import JobSpecError, check_schema, identify, read_documents

    failed = 0
    outputs: list[str] = []
    checking = None  # the --check control plane, started for the first document that can run
    for name in args.files:
        try:
            documents = read_documents(source(name), name="<stdin>" if name == "-" else None)
        except JobSpecError as exc:
            print(str(exc), file=sys.stderr)
            failed += 1
            continue
        if not documents:
            print(no_documents(name), file=sys.stderr)
            failed += 1
        for doc in documents:
            if doc.data.get("kind") not in KINDS:
                print(f"{doc.source}: {doc.data.get('kind')} is not a v1 training job; skipped", file=sys.stderr)
                continue
            issues = identify(doc) or check_schema(doc).errors
            if issues:
                print(str(JobSpecError(doc.source, issues)), file=sys.stderr)
                failed += 1
                continue
            migration = migrate(doc.data)
            rendered = _checked(migration.render(), migration.documents())
            if getattr(args, "check", False):
                from airflow_provider_training.cli.migrate_check import checker, not_runnable

                refusal = not_runnable(doc.data)
                if refusal is None:
                    checking = checking or stack.enter_context(checker())
                    same, lines = checking.check(doc.data, migration.documents())
                else:
                    same, lines = False, refusal
                failed += 0 if same else 1
                rendered = "\n".join(lines) + "\n" + rendered
            outputs.append(f"# source: {doc.source}\n" + rendered)
    sys.stdout.write("---\n".join(outputs))
    return 1 if failed else 0


def _checked(rendered: str, documents: list[dict[str, Any]]) -> str:
    """The migration with what ``airflow-training validate`` says about it, as comments on top."""
    from airflow_provider_training.validation import validate

    lines = []
    for report in validate(documents):
        lines += [f"# validate: {report.kind} {report.name}: error: {issue}" for issue in report.errors]
        lines += [f"# validate: {report.kind} {report.name}: warning: {issue}" for issue in report.warnings]
    return "\n".join(lines) + "\n" + rendered if lines else rendered
