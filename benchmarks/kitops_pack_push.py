"""Benchmark: pack and push a model directory vs tar/sha256sum and curl -T baselines (same run).

Usage: PYTHONPATH=src:. python benchmarks/kitops_pack_push.py [SIZE_MIB]   (default 1024)
Prints ratios (goal: pack <1.2x tar|sha256sum, push <1.3x curl -T, second push uploads 0 bytes,
peak RSS of pack/push children <100 MiB).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]


def timed(argv: list[str] | str, shell: bool = False, env: dict[str, str] | None = None) -> tuple[float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    subprocess.run(argv, shell=shell, check=True, stdout=subprocess.DEVNULL, env=env)
    elapsed = time.perf_counter() - t
    return elapsed, max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def main() -> None:
    from tests.fixtures.registry import RunningRegistry

    size_mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    tmp = Path(tempfile.mkdtemp(prefix="kitbench-"))
    ctx = tmp / "model"
    (ctx / "model").mkdir(parents=True)
    parts = 4
    for i in range(parts):
        with open(ctx / "model" / f"shard-{i}.bin", "wb") as fh:
            for _ in range(size_mib // parts):
                fh.write(os.urandom(1 << 20))
    (ctx / "Kitfile").write_text("manifestVersion: 1.0.0\nmodel:\n  path: model\n")
    reg = RunningRegistry(tmp / "reg")
    reg.start()
    env = {**os.environ, "KITOPS_HOME": str(tmp / "home"), "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    cli = [sys.executable, "-m", "airflow_provider_training.cli", "kit"]
    ref = f"{reg.host}/bench/model:v1"
    try:
        base_tar, _ = timed(f"tar cf - -C {ctx} model | sha256sum", shell=True)
        t_pack, rss_pack = timed([*cli, "pack", str(ctx), "-t", ref], env=env)
        base_gz, _ = timed(f"tar cf - -C {ctx} model | gzip -6 | sha256sum", shell=True)
        t_gz, _ = timed([*cli, "pack", str(ctx), "-t", ref + "-gz", "--compression", "gzip"], env=env)
        blob = tmp / "layer.tar"
        subprocess.run(f"tar cf {blob} -C {ctx} model", shell=True, check=True)
        loc = subprocess.run(
            ["curl", "-s", "-D", "-", "-o", "/dev/null", "-X", "POST", f"{reg.url}/v2/bench/curl/blobs/uploads/"],
            capture_output=True,
            text=True,
        ).stdout
        location = next(
            line.split(": ", 1)[1].strip() for line in loc.splitlines() if line.lower().startswith("location:")
        )
        digest = subprocess.run(["sha256sum", str(blob)], capture_output=True, text=True).stdout.split()[0]
        sep = "&" if "?" in location else "?"
        base_curl, _ = timed(
            [
                "curl",
                "-s",
                "-T",
                str(blob),
                "-H",
                "Content-Type: application/octet-stream",
                f"{location}{sep}digest=sha256%3A{digest}",
            ]
        )
        t_push, rss_push = timed([*cli, "push", ref, "--plain-http"], env=env)
        t_push2, _ = timed([*cli, "push", ref, "--plain-http"], env=env)
    finally:
        reg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"size: {size_mib} MiB in {parts} files")
    print(f"pack none : {t_pack:6.2f}s vs tar|sha256sum {base_tar:6.2f}s  ratio {t_pack / base_tar:.2f}")
    print(f"pack gzip : {t_gz:6.2f}s vs tar|gzip -6|sha256sum {base_gz:6.2f}s  ratio {t_gz / base_gz:.2f}")
    print(f"push      : {t_push:6.2f}s vs curl -T {base_curl:6.2f}s  ratio {t_push / base_curl:.2f}")
    print(f"push again: {t_push2:6.2f}s (all blobs skipped by HEAD)")
    print(f"peak RSS of CLI children (pack+push, max): {max(rss_pack, rss_push) / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
