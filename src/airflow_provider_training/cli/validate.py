"""``airflow-training validate``: the provider's ``kubectl apply --dry-run=server``, for CI of DAG repos."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from airflow_provider_training.cli.files import add_filename_option, no_documents, source


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check training-job YAML files as a cluster would, plus the provider's checks and lint",
        description=(
            "Check each document of each file: what a cluster rejects (CRD schema, webhook), what it "
            "accepts but can never run, and likely mistakes (warnings). Exit status 1 if any document "
            "is invalid, 0 otherwise."
        ),
    )
    add_filename_option(parser)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="treat unknown fields as errors, as kubectl apply's default strict validation does",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from airflow_provider_training.validation import validate

    invalid = 0
    for name in args.files:
        reports = validate(source(name), strict=args.strict)
        if not reports:
            print(no_documents(name), file=sys.stderr)
            invalid += 1
        for report in reports:
            for line in report.lines():
                print(line)
            invalid += not report.ok
    if invalid:
        print(f"{invalid} invalid document(s)", file=sys.stderr)
    return 1 if invalid else 0
