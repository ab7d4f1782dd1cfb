"""The ``kit`` of KitOps images on the embedded node: this provider's ``airflow-training kit``.

Upstream ``kit login`` also takes the password as ``-p`` / ``--password`` (the seed's
``package-job.yaml`` does; ``airflow-training validate`` warns about it, since a command line is
visible to every process). This provider's ``kit login`` reads it only from stdin, so here the
option is turned into ``--password-stdin`` with the password fed through a pipe: the seed runs
unchanged, and the password at least leaves the ``kit`` process's own argv.

Standard library only; run as ``python -m airflow_provider_training.embedded.node.kitshim ARGS``.
"""

from __future__ import annotations

import os
import sys


def translate(argv: list[str]) -> tuple[list[str], str | None]:
    """(argv for ``airflow-training kit``, the password to feed on stdin or None)."""
    if not argv or argv[0] != "login":
        return argv, None
    out: list[str] = []
    password = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-p", "--password") and i + 1 < len(argv):
            password, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--password="):
            password, i = arg.split("=", 1)[1], i + 1
            continue
        out.append(arg)
        i += 1
    if password is None:
        return argv, None
    return [*out, "--password-stdin"], password


def main(argv: list[str]) -> None:
    args, password = translate(argv)
    if password is not None:
        read, write = os.pipe()
        os.write(write, password.encode() + b"\n")
        os.close(write)
        os.dup2(read, 0)
        os.close(read)
    command = [sys.executable, "-m", "airflow_provider_training.cli", "kit", *args]
    os.execv(sys.executable, command)


if __name__ == "__main__":
    main(sys.argv[1:])
