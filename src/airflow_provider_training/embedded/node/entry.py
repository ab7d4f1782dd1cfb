"""Command line of the processes the node agent starts, loaded by file path so that a supervisor
starts in milliseconds: the package's ``__init__`` modules (which load the API server) are replaced
by empty package stubs before anything is imported.

    python -I -S entry.py run  <pod-dir>                        # the pod's supervisor
    python -I -S entry.py zygote [--spares N ...]               # forks supervisors (pod dirs on stdin)
    python -I -S entry.py exec <pod-dir> <container> -- ARGV    # run ARGV "inside" a running pod
    python -I -S entry.py remote-exec SOCKET exec POD -- ARGV   # the same, asked of the node agent
    python -I -S entry.py probe                                 # which mount mechanism works here
    python -I -S entry.py oci-run <bundle>                      # a container of an image (runc)
"""

from __future__ import annotations

import os
import sys
import types


def _stub_packages() -> None:
    # os.path, not pathlib: ``oci-run`` starts a fresh interpreter per container start, and pathlib
    # (with the re and urllib.parse it imports) is a good part of that start
    node = os.path.dirname(os.path.realpath(__file__))
    embedded = os.path.dirname(node)
    package = os.path.dirname(embedded)
    for name, path in (
        ("airflow_provider_training", package),
        ("airflow_provider_training.embedded", embedded),
        ("airflow_provider_training.embedded.node", node),
    ):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [path]
            sys.modules[name] = module
    root = os.path.dirname(package)
    if root not in sys.path:
        sys.path.insert(0, root)


def main(argv: list[str]) -> int:
    _stub_packages()
    command = argv[0] if argv else ""
    if command == "run":
        from airflow_provider_training.embedded.node import supervisor

        return supervisor.main(argv[1])
    if command == "zygote":
        from airflow_provider_training.embedded.node import zygote

        return zygote.main(argv[1:])
    if command == "exec":
        from airflow_provider_training.embedded.node import podexec

        return podexec.main(argv[1:])
    if command == "remote-exec":
        from airflow_provider_training.embedded.node import execclient

        return execclient.main(argv[1:])
    if command == "oci-run":
        from airflow_provider_training.embedded.node.oci import run

        return run.main(argv[1:])
    if command == "probe":
        from airflow_provider_training.embedded.node import isolation

        print(isolation.probe())
        return 0
    print(
        f"usage: {os.path.basename(__file__)} run POD_DIR | zygote [--spares N] | exec POD_DIR CONTAINER -- ARGV | probe",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
