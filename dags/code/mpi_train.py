"""Data-parallel softmax regression on scikit-learn's digits with MPI (mpi4py), as an MPIJob runs it.

``mpirun`` on the launcher starts one process per worker slot; each computes the gradient on its
shard and ``Allreduce`` averages them, so every rank holds the same weights. Rank 0 writes
``weights.npy`` and ``metrics.json`` to ``--output``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from mpi4py import MPI
from sklearn.datasets import load_digits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--output", default="/output")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    digits = load_digits()
    x, y = digits.data / 16.0, np.eye(10)[digits.target]
    order = np.random.default_rng(0).permutation(len(y))
    cut = int(len(order) * 0.8)
    mine, test = order[:cut][rank::world], order[cut:]
    weights = np.zeros((64, 10))
    for epoch in range(args.epochs):
        logits = x[mine] @ weights
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        grad = x[mine].T @ (p - y[mine]) / len(mine)
        total = np.empty_like(grad)
        comm.Allreduce(grad, total, op=MPI.SUM)
        weights -= args.lr * total / world
        if rank == 0:  # the cockpit's metrics convention (docs/ui.md): one METRIC line per epoch
            acc = float(((x[test] @ weights).argmax(axis=1) == digits.target[test]).mean())
            print("METRIC " + json.dumps({"step": epoch + 1, "accuracy": acc}), flush=True)
    accuracy = float(((x[test] @ weights).argmax(axis=1) == digits.target[test]).mean())
    print(f"rank {rank}/{world} on {MPI.Get_processor_name()}: test accuracy {accuracy:.4f}", flush=True)
    if rank == 0:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        np.save(out / "weights.npy", weights)
        (out / "metrics.json").write_text(json.dumps({"accuracy": accuracy, "world_size": world}) + "\n")


if __name__ == "__main__":
    main()
