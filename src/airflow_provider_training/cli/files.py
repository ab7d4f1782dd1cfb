"""The ``-f/--filename`` option of the commands that read job documents (kubectl's spelling), and
reading what it names (``-`` is stdin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_filename_option(parser: argparse.ArgumentParser) -> None:
    """``-f FILE`` (repeatable, required), collected in ``args.files``."""
    parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        required=True,
        metavar="FILE",
        help="a YAML file (several documents allowed); repeat for more files, '-' for stdin",
    )


def source(name: str) -> str | Path:
    """What ``-f name`` names: the text of stdin for ``-``, else the file's path."""
    return sys.stdin.read() if name == "-" else Path(name)


def no_documents(name: str) -> str:
    """The error for a file with nothing to check (empty, or only ``---``): exit 0 would read as "valid"."""
    shown = "<stdin>" if name == "-" else name
    return f"error: {shown}: no documents (the file is empty or holds only '---'); give it at least one object"
