"""The DDP example (``dags/code/train.py``) launched with torchrun, for the benchmarks that compare a
job on the control plane with the same launchers started directly (``controller_bench.py``,
``trainjob_vs_pytorchjob.py``): one set of launcher arguments, one timing loop."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

PY = sys.executable
TRAIN = Path(__file__).resolve().parents[1] / "dags" / "code" / "train.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def torchrun(epochs: int, out: Path, nnodes: str, node_rank: str, master_addr: str, master_port: str) -> list[str]:
    """One torchrun launcher (one rank on its node) of the training."""
    return [
        PY,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=1",
        f"--nnodes={nnodes}",
        f"--node_rank={node_rank}",
        f"--master_addr={master_addr}",
        f"--master_port={master_port}",
        str(TRAIN),
        f"--epochs={epochs}",
        f"--output={out}",
    ]


def in_job(epochs: int, out: Path) -> list[str]:
    """The launcher as a replica's command: the operator's injected variables fill in the rest."""
    return torchrun(epochs, out, "$(WORLD_SIZE)", "$(RANK)", "$(MASTER_ADDR)", "$(MASTER_PORT)")


def directly(nodes: int, epochs: int, out: Path) -> float:
    """Seconds for ``nodes`` launchers started directly on 127.0.0.1 (nnodes=nodes) to finish."""
    port = str(free_port())
    t0 = time.perf_counter()
    launchers = [
        subprocess.Popen(
            torchrun(epochs, out, str(nodes), str(rank), "127.0.0.1", port),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for rank in range(nodes)
    ]
    codes = [launcher.wait() for launcher in launchers]
    assert codes == [0] * nodes, f"torchrun launchers started directly exited with {codes}"
    return time.perf_counter() - t0
