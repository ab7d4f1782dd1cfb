"""The ``airflow-training`` command.

Each command group lives in its own module with a ``register(subparsers)`` function that adds its
parser and sets ``func`` (called with the parsed namespace, returns the exit code). Groups are
imported only when the command line names them, so ``airflow-training validate`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# command name -> module under airflow_provider_training.cli
GROUPS: dict[str, str] = {
    "validate": "validate",
    "embedded": "embedded",
    "kit": "kit",
    "migrate": "migrate",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow-training",
        description="Kubeflow training jobs, the embedded control plane and KitOps ModelKits for Airflow.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name, module in GROUPS.items():
        if only is not None and name != only:
            subparsers.add_parser(name, help=f"see 'airflow-training {name} --help'", add_help=False)
            continue
        try:
            mod = importlib.import_module(f"airflow_provider_training.cli.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"airflow_provider_training.cli.{module}":
                raise
            continue
        mod.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    only = args_list[0] if args_list and args_list[0] in GROUPS else None
    parser = build_parser(only)
    args = parser.parse_args(args_list)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
