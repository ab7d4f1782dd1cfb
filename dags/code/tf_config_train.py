"""The digits training of ``train.py``, driven by ``TF_CONFIG`` the way a TFJob replica is.

The Training Operator gives each TFJob replica ``TF_CONFIG`` (``{"cluster": {"chief": [...],
"worker": [...]}, "task": {"type": ..., "index": ...}}``) instead of MASTER_ADDR / RANK. TensorFlow
reads it through ``tf.distribute.MultiWorkerMirroredStrategy``; TensorFlow is not needed to show the
mechanics, so this script reads it itself: the chief (or worker 0 without a chief) is rank 0 and
its address is the rendezvous, every other replica gets the next rank, and then the PyTorch DDP
training of ``train.py`` runs with those.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def ranks_from_tf_config(tf_config: str) -> dict[str, str]:
    """MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE for this replica."""
    config = json.loads(tf_config)
    cluster, me = config["cluster"], config["task"]
    order = [("chief", a) for a in cluster.get("chief", [])] + [("worker", a) for a in cluster.get("worker", [])]
    if not order:
        raise SystemExit(f"TF_CONFIG names no chief or worker: {tf_config}")
    mine = cluster[me["type"]][int(me["index"])]
    rank = next(i for i, (kind, address) in enumerate(order) if kind == me["type"] and address == mine)
    host, port = order[0][1].rsplit(":", 1)
    return {"MASTER_ADDR": host, "MASTER_PORT": port, "RANK": str(rank), "WORLD_SIZE": str(len(order))}


if __name__ == "__main__":
    raw = os.environ.get("TF_CONFIG")
    if raw:
        os.environ.update(ranks_from_tf_config(raw))
        print(f"TF_CONFIG -> rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}", flush=True)
    sys.path.insert(0, str(Path(__file__).parent))
    import train

    train.main()
