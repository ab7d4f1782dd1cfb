"""Distributed XGBoost on scikit-learn's digits, as one replica of an XGBoostJob.

The Training Operator gives every replica MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK. Rank 0
(the Master) also runs the Rabit tracker on MASTER_PORT; every replica joins the collective, trains
on its shard (``hist`` histograms are all-reduced, so all ranks end with the same booster), and rank 0
writes ``model.json`` and ``metrics.json`` to ``--output``.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from pathlib import Path

import numpy as np
import xgboost as xgb
from sklearn.datasets import load_digits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--output", default="/output")
    args = parser.parse_args()
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    host, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "9091"))
    if rank == 0:
        tracker = xgb.tracker.RabitTracker(n_workers=world, host_ip=host, port=port, timeout=120)
        tracker.start()
        threading.Thread(target=tracker.wait_for, daemon=True).start()
    digits = load_digits()
    order = np.random.default_rng(0).permutation(len(digits.target))
    cut = int(len(order) * 0.8)
    train, test = order[:cut][rank::world], order[cut:]
    with xgb.collective.CommunicatorContext(
        dmlc_communicator="rabit", dmlc_tracker_uri=host, dmlc_tracker_port=port, dmlc_task_id=str(rank)
    ):
        dtrain = xgb.DMatrix(digits.data[train], label=digits.target[train])
        booster = xgb.train(
            {"objective": "multi:softmax", "num_class": 10, "tree_method": "hist", "nthread": 1},
            dtrain,
            num_boost_round=args.rounds,
        )
    accuracy = float((booster.predict(xgb.DMatrix(digits.data[test])) == digits.target[test]).mean())
    print(f"rank {rank}/{world}: test accuracy {accuracy:.4f}", flush=True)
    if rank == 0:  # the cockpit's metrics convention (docs/ui.md)
        print("METRIC " + json.dumps({"step": args.rounds, "accuracy": accuracy}), flush=True)
    if rank == 0:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        booster.save_model(str(out / "model.json"))
        (out / "metrics.json").write_text(json.dumps({"accuracy": accuracy, "world_size": world}) + "\n")


if __name__ == "__main__":
    main()
