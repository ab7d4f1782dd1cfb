"""What the embedded node can give pods: GPUs (``nvidia.com/gpu``), CPU and memory, and the
admission of a job's pods together (gang), so two half-started jobs never hold each other's GPUs.

Settings (daemon environment):

- ``AIRFLOW_TRAINING_GPUS``: the GPU ids to hand out (``0,1``), or ``none``; default: what
  ``nvidia-smi`` lists, else none.
- ``AIRFLOW_TRAINING_GPU_POLICY``: ``strict`` (default) keeps a pod whose GPUs cannot be had
  Pending with a ``FailedScheduling`` event, like an unschedulable pod; ``relaxed`` starts it with
  the GPUs that are free (maybe none) and a Warning event (laptops without a GPU).
- ``AIRFLOW_TRAINING_OVERCOMMIT``: ``true`` (default) lets CPU / memory requests exceed the
  machine with a Warning event; ``false`` keeps such pods Pending.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from decimal import Decimal

from airflow_provider_training.embedded.node.podspec import GPU, gpus_requested, parse_quantity, resources
from airflow_provider_training.specs.unstructured import Unstructured


def detect_gpus() -> list[str]:
    setting = os.environ.get("AIRFLOW_TRAINING_GPUS")
    if setting is not None:
        return [] if setting.strip().lower() in ("", "none") else [g.strip() for g in setting.split(",") if g.strip()]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = [line.strip() for line in out.splitlines() if line.strip()]
    if gpus:
        _make_uvm_device()
    return gpus


def _make_uvm_device() -> None:
    """CUDA's first use on a machine makes ``/dev/nvidia-uvm`` through the setuid
    ``nvidia-modprobe``; a pod cannot (no ``MKNOD``: ``privileges``), so the node makes it first, as
    the NVIDIA container toolkit does on the host. Pods' views show the host's ``/dev`` as it is."""
    if os.path.exists("/dev/nvidia-uvm") or shutil.which("nvidia-modprobe") is None:
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["nvidia-modprobe", "-u", "-c=0"], capture_output=True, timeout=10, check=False)


def _cpu_memory(pod: Unstructured) -> tuple[Decimal, Decimal]:
    cpu = memory = Decimal(0)
    for c in pod.get("spec", {}).get("containers") or []:
        requests, _ = resources(c)
        if "cpu" in requests:
            cpu += parse_quantity(requests["cpu"])
        if "memory" in requests:
            memory += parse_quantity(requests["memory"])
    return cpu, memory


@dataclass
class Decision:
    admitted: bool
    gpus: dict[str, list[str]] = field(default_factory=dict)  # pod uid -> GPU ids
    message: str = ""  # why not admitted (FailedScheduling), or the warning when admitted anyway
    warning_reason: str = ""


@dataclass
class Capacity:
    gpus: list[str]
    strict_gpus: bool = True
    overcommit: bool = True
    cpus: Decimal = Decimal(os.cpu_count() or 1)
    memory: Decimal = Decimal(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    held: dict[str, tuple[list[str], Decimal, Decimal]] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> Capacity:
        return cls(
            detect_gpus(),
            strict_gpus=os.environ.get("AIRFLOW_TRAINING_GPU_POLICY", "strict").lower() != "relaxed",
            overcommit=os.environ.get("AIRFLOW_TRAINING_OVERCOMMIT", "true").lower() not in ("false", "0", "no"),
        )

    def free_gpus(self) -> list[str]:
        taken = {g for ids, _, _ in self.held.values() for g in ids}
        return [g for g in self.gpus if g not in taken]

    def admit(self, pods: list[Unstructured]) -> Decision:
        """All of ``pods`` (one job's pods waiting to start) or none of them."""
        free = self.free_gpus()
        need = sum(gpus_requested(p) for p in pods)
        used_cpu = sum((c for _, c, _ in self.held.values()), Decimal(0))
        used_mem = sum((m for _, _, m in self.held.values()), Decimal(0))
        want = [_cpu_memory(p) for p in pods]
        cpu = used_cpu + sum((c for c, _ in want), Decimal(0))
        mem = used_mem + sum((m for _, m in want), Decimal(0))
        short: list[str] = []
        if need > len(free):
            short.append(GPU)
        over = [name for name, total, cap in (("cpu", cpu, self.cpus), ("memory", mem, self.memory)) if total > cap]
        if (short and self.strict_gpus) or (over and not self.overcommit):
            insufficient = ", ".join(f"1 Insufficient {r}" for r in [*short, *([] if self.overcommit else over)])
            return Decision(
                False,
                message=f"0/1 nodes are available: {insufficient}. ({need} GPU(s) wanted, "
                f"{len(free)} of {len(self.gpus)} free)"
                if short
                else f"0/1 nodes are available: {insufficient}.",
            )
        decision = Decision(True)
        warnings = []
        if short:
            warnings.append(
                f"{need} nvidia.com/gpu requested but {len(free)} free on this machine; started anyway "
                "(AIRFLOW_TRAINING_GPU_POLICY=relaxed)"
            )
        if over:
            warnings.append(
                f"requests exceed this machine ({', '.join(over)}): cpu {cpu} of {self.cpus}, "
                f"memory {int(mem)} of {int(self.memory)} bytes; processes will share it"
            )
        decision.message = "; ".join(warnings)
        decision.warning_reason = "Overcommitted" if warnings else ""
        for pod, (c, m) in zip(pods, want, strict=True):
            n = gpus_requested(pod)
            ids, free = free[:n], free[n:]
            uid = pod["metadata"]["uid"]
            decision.gpus[uid] = ids
            self.held[uid] = (ids, c, m)
        return decision

    def release(self, uid: str) -> None:
        self.held.pop(uid, None)
