"""Train a small digit classifier with PyTorch DDP — the example job of this project: on CUDA with NCCL
when the replica was given a GPU (``CUDA_VISIBLE_DEVICES`` non-empty, e.g. from an ``nvidia.com/gpu``
limit), else on CPU with gloo.

Runs as one replica of a PyTorchJob: under ``torchrun`` (reads RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, LOCAL_RANK from the environment torchrun sets up from the operator's PET_* variables),
under the seed's ``python -m torch.distributed.launch … --node_rank=$(RANK)`` command line, or on its
own as a single process. The data set is scikit-learn's handwritten digits (shipped with the package,
no download). Rank 0 writes ``model.pt`` (TorchScript), ``metrics.json`` and a ``Kitfile`` to
``--output``.

Run as a Kubeflow Trainer v2 TrainJob (the status server's ``KUBEFLOW_TRAINER_SERVER_*`` variables
set), rank 0 also reports its progress after each epoch — percent done, seconds left, loss and
accuracy — into the TrainJob's ``status.trainerStatus`` (``kubectl get trainjob -o yaml``, the
operator's task log, the cockpit), as the Kubeflow SDK's ``update_trainjob_status`` does: the same
POST, with the standard library, so the training image needs no SDK.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

KITFILE = """manifestVersion: "1.0"
package:
  name: digits-classifier
  description: Handwritten digit classifier (8x8 scikit-learn digits), trained with PyTorch DDP.
  license: Apache-2.0
model:
  name: digits-classifier
  path: model.pt
  framework: pytorch
  description: TorchScript module; input float32 [N, 64] in 0..16, output logits [N, 10].
docs:
  - path: metrics.json
    description: Training and evaluation metrics.
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=int(os.environ.get("EPOCHS", "10")))
    parser.add_argument("--batch-size", type=int, default=int(os.environ.get("BATCH_SIZE", "64")))
    parser.add_argument(
        "--lr", "--learning-rate", dest="lr", type=float, default=float(os.environ.get("LEARNING_RATE", "0.01"))
    )
    parser.add_argument("--output", default=os.environ.get("OUTPUT_DIR", "/output"))
    parser.add_argument("--seed", type=int, default=0)
    # torch.distributed.launch passes --local-rank (or --local_rank before torch 2.0).
    parser.add_argument("--local-rank", "--local_rank", dest="local_rank", type=int, default=None)
    return parser.parse_args()


def load_digits_split(seed: int) -> tuple[TensorDataset, TensorDataset]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    features = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    cut = int(len(order) * 0.8)
    train, test = order[:cut], order[cut:]
    return TensorDataset(features[train], labels[train]), TensorDataset(features[test], labels[test])


class DigitsNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class TrainerStatus:
    """Progress reports to Kubeflow Trainer's status server, what the Kubeflow SDK's
    ``update_trainjob_status(progress_percent, estimated_remaining_seconds, metrics)`` sends: nothing
    outside a TrainJob, at most one every 5 s (the SDK's throttle) except the last, never raises."""

    MIN_INTERVAL = 5.0

    def __init__(self) -> None:
        self.url = os.environ.get("KUBEFLOW_TRAINER_SERVER_URL")
        self.last = float("-inf")

    def report(self, percent: int, remaining: int, metrics: dict[str, float], *, final: bool = False) -> bool:
        if not self.url or (not final and time.monotonic() - self.last < self.MIN_INTERVAL):
            return False
        status = {
            "lastUpdatedTime": datetime.now(UTC).isoformat(),
            "progressPercentage": max(0, min(100, percent)),
            "estimatedRemainingSeconds": max(0, remaining),
            "metrics": [{"name": name, "value": f"{value:.4f}"} for name, value in metrics.items()],
        }
        try:
            token = Path(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read_text().strip()
            context = ssl.create_default_context(cafile=os.environ.get("KUBEFLOW_TRAINER_SERVER_CA_CERT"))
            request = urllib.request.Request(
                self.url,
                data=json.dumps({"trainerStatus": status}).encode(),
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                method="POST",
            )
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                ok = bool(response.status == 200)
        except (OSError, KeyError, ValueError) as exc:  # a report is never worth failing the training
            print(f"rank 0: progress report not sent: {exc}", flush=True)
            return False
        self.last = time.monotonic()
        return ok


def pick_device() -> torch.device:
    """CUDA when this replica was given a GPU, else CPU. An empty ``CUDA_VISIBLE_DEVICES`` means "no
    GPU for this replica" (the node hides the others), so CUDA is not even initialised then."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return torch.device("cpu")
    if torch.cuda.is_available():
        # one process per replica: its first visible GPU (LOCAL_RANK under torchrun with several)
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    return torch.device("cpu")


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    device = pick_device()
    if device.type == "cuda":
        torch.cuda.set_device(device)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    distributed = world_size > 1
    backend = "nccl" if device.type == "cuda" else "gloo"
    if distributed:
        dist.init_process_group(backend, timeout=timedelta(seconds=120))
    rank = dist.get_rank() if distributed else 0
    world_size = dist.get_world_size() if distributed else 1
    where = f"{device} ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "cpu"
    print(
        f"rank {rank}/{world_size}: starting on {where}, backend={backend if distributed else 'none'}, "
        f"epochs={args.epochs} batch_size={args.batch_size} lr={args.lr}",
        flush=True,
    )
    # which interpreter and user ran this replica: this machine's Python, or a training image's
    print(f"rank {rank}: python {sys.executable} as uid {os.getuid()}", flush=True)

    train_set, test_set = load_digits_split(args.seed)
    sampler = (
        DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
        if distributed
        else None
    )
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, shuffle=sampler is None)
    net = DigitsNet().to(device)
    model: nn.Module = (
        DistributedDataParallel(net, device_ids=[device.index] if device.type == "cuda" else None)
        if distributed
        else net
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    started = time.time()
    history: list[float] = []
    progress = TrainerStatus() if rank == 0 else None
    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        total, count = 0.0, 0
        for features, labels in loader:
            features, labels = features.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(features), labels)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(labels)
            count += len(labels)
        summed = torch.tensor([total, float(count)], device=device)
        if distributed:
            dist.all_reduce(summed)
        epoch_loss = (summed[0] / summed[1]).item()
        history.append(epoch_loss)
        print(f"rank {rank}: epoch {epoch + 1}/{args.epochs} loss {epoch_loss:.4f}", flush=True)
        if rank == 0:  # the cockpit's metrics convention (docs/ui.md): one METRIC line per epoch
            with torch.no_grad():
                epoch_accuracy = (net(test_set.tensors[0]).argmax(dim=1) == test_set.tensors[1]).float().mean().item()
            print(
                "METRIC " + json.dumps({"step": epoch + 1, "loss": epoch_loss, "accuracy": epoch_accuracy}), flush=True
            )
            if progress is not None:
                per_epoch = (time.time() - started) / (epoch + 1)
                progress.report(
                    round(100 * (epoch + 1) / args.epochs),
                    round(per_epoch * (args.epochs - epoch - 1)),
                    {"loss": epoch_loss, "accuracy": epoch_accuracy},
                    final=epoch + 1 == args.epochs,
                )

    net.eval()
    with torch.no_grad():
        features, labels = test_set.tensors
        accuracy = (net(features.to(device)).argmax(dim=1) == labels.to(device)).float().mean().item()
    print(f"rank {rank}: test accuracy {accuracy:.4f}", flush=True)

    if rank == 0:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        scripted = torch.jit.script(_Scaled(net.cpu()))  # served on CPU
        scripted.save(str(out / "model.pt"))
        metrics = {
            "accuracy": accuracy,
            "loss": history[-1] if history else None,
            "loss_history": history,
            "epochs": args.epochs,
            "world_size": world_size,
            "device": str(device),
            "backend": backend if distributed else None,
            "train_seconds": round(time.time() - started, 3),
        }
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
        if not (out / "Kitfile").exists():
            (out / "Kitfile").write_text(KITFILE)
        print(f"rank 0: wrote {out / 'model.pt'} and metrics.json (accuracy {accuracy:.4f})", flush=True)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


class _Scaled(nn.Module):
    """What gets served: raw 0..16 pixel values in, logits out."""

    def __init__(self, net: DigitsNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x / 16.0)


if __name__ == "__main__":
    main()
