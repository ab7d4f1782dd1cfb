"""Benchmark (issue 16): ModelPack vs ModelKit pack/push, ``pack --push`` streaming, and what signing
plus provenance add — all in one run, against the same baselines, printed side by side.

Usage: PYTHONPATH=src:. python benchmarks/kitops_modelpack_sign.py [SIZE_MIB]   (default 1024)

Goals: ModelPack pack/push ratios equal to ModelKit's (pack <= 1.2x ``tar | sha256sum``, push <=
1.3x ``curl -T``); ``pack --push`` writes nothing to disk and its peak RSS stays < 100 MiB; signing
and provenance add < 100 ms to a pack-and-push of SIZE_MIB.
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
    """Seconds and the peak RSS (KiB) of the child (children's max so far; run the big ones last)."""
    t = time.perf_counter()
    subprocess.run(argv, shell=shell, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def curl_upload(reg: object, blob: Path, repo: str) -> float:
    url = reg.url  # type: ignore[attr-defined]
    head = subprocess.run(
        ["curl", "-s", "-D", "-", "-o", "/dev/null", "-X", "POST", f"{url}/v2/{repo}/blobs/uploads/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    location = next(
        line.split(": ", 1)[1].strip() for line in head.splitlines() if line.lower().startswith("location:")
    )
    digest = subprocess.run(["sha256sum", str(blob)], capture_output=True, text=True, check=True).stdout.split()[0]
    sep = "&" if "?" in location else "?"
    t, _ = timed(["curl", "-s", "-T", str(blob), "-H", "Content-Type: application/octet-stream",
                  f"{location}{sep}digest=sha256%3A{digest}"])  # fmt: skip
    return t


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def main() -> None:
    from tests.fixtures import registry as registry_fixture
    from tests.fixtures.registry import RunningRegistry

    # a docker-registry elsewhere than Debian's path (e.g. on a machine without the package)
    registry_fixture.REGISTRY_BIN = os.environ.get("DOCKER_REGISTRY_BIN", registry_fixture.REGISTRY_BIN)

    size_mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    tmp = Path(tempfile.mkdtemp(prefix="kitbench16-"))
    ctx = tmp / "model"
    (ctx / "model").mkdir(parents=True)
    parts = 4
    for i in range(parts):
        with open(ctx / "model" / f"shard-{i}.bin", "wb") as fh:
            for _ in range(size_mib // parts):
                fh.write(os.urandom(1 << 20))
    (ctx / "Kitfile").write_text(
        "manifestVersion: 1.0.0\npackage:\n  name: bench\nmodel:\n  name: bench\n  path: model\n"
    )
    # one registry per format: ModelKit and ModelPack share layer blobs, a shared registry would skip them
    regs = {name: RunningRegistry(tmp / f"reg-{name}") for name in ("kit", "pack", "stream", "curl")}
    for reg in regs.values():
        reg.start()
    extra = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}" + (f":{extra}" if extra else "")}
    cli = [sys.executable, "-m", "airflow_provider_training.cli", "kit"]
    rows: dict[str, tuple[float, float]] = {}
    try:
        base_tar, _ = timed(f"tar cf - -C {ctx} model | sha256sum", shell=True)
        blob = tmp / "layer.tar"
        subprocess.run(f"tar cf {blob} -C {ctx} model", shell=True, check=True)
        base_curl = curl_upload(regs["curl"], blob, "bench/curl")
        blob.unlink()
        for fmt, flags in (("kit", []), ("pack", ["--use-model-pack"])):
            home = tmp / f"home-{fmt}"
            e = {**env, "KITOPS_HOME": str(home)}
            ref = f"{regs[fmt].host}/bench/model:v1"
            t_pack, _ = timed([*cli, "pack", str(ctx), "-t", ref, *flags], env=e)
            t_push, _ = timed([*cli, "push", ref, "--plain-http"], env=e)
            rows[fmt] = (t_pack, t_push)
            shutil.rmtree(home)

        # pack --push: nothing on disk, bounded memory; then sign + attest in the same process
        home = tmp / "home-stream"
        home.mkdir()
        code = f"""
import json, resource, sys, time
from airflow_provider_training.kitops import keys, packpush, provenance, signing
from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.reference import parse
ref = parse("{regs["stream"].host}/bench/model:v1")
t0 = time.perf_counter()
with make_client(ref.registry, plain_http=True) as client:
    res = packpush.pack_and_push("{ctx}", ref, client)
    t1 = time.perf_counter()
    pair = keys.generate_key_pair("pw")
    t_key0 = time.perf_counter()
    key = keys.load_private_key(pair.private_pem, "pw")
    t_key1 = time.perf_counter()
    facts = provenance.BuildFacts(dag_id="bench", run_id="r1", task_ids=["train", "package"])
    stmt = provenance.statement(f"{{ref.registry}}/{{ref.repository}}", res.digest, facts, [l.to_json() for l in res.layers])
    signing.sign_and_attest(client, ref, res.digest, key, stmt, len(res.manifest))
    t2 = time.perf_counter()
    again = []
    for _ in range(4):  # re-signing the same digest: the registry's latency under load varies a lot
        t = time.perf_counter()
        signing.sign_and_attest(client, ref, res.digest, key, stmt, len(res.manifest))
        again.append(time.perf_counter() - t)
print(json.dumps({{"push": t1 - t0, "sign": t2 - t_key1, "key": t_key1 - t_key0, "again": sorted(again),
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}))
"""
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**env, "KITOPS_HOME": str(home)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        import json

        stream = json.loads(out.strip().splitlines()[-1])
        stream_disk = du(home)
        # the CLI as users run it, its peak RSS measured alone (a wrapper waits for it)
        cli_home = tmp / "home-cli"
        wrapper = (
            "import resource, subprocess, sys, time; t = time.perf_counter(); "
            "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
            "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
        )
        argv = [*cli, "pack", str(ctx), "-t", f"{regs['stream'].host}/bench/cli:v1", "--push", "--plain-http"]
        got = subprocess.run(
            [sys.executable, "-c", wrapper, *argv],
            env={**env, "KITOPS_HOME": str(cli_home)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        cli_stream = (float(got[0]), int(got[1]), du(cli_home))
    finally:
        for reg in regs.values():
            reg.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"size: {size_mib} MiB in {parts} files; baselines: tar|sha256sum {base_tar:.2f}s, curl -T {base_curl:.2f}s")
    print(f"{'':22}{'ModelKit':>12}{'ModelPack':>12}")
    print(f"{'pack (s)':22}{rows['kit'][0]:12.2f}{rows['pack'][0]:12.2f}")
    print(f"{'pack / tar|sha256sum':22}{rows['kit'][0] / base_tar:12.2f}{rows['pack'][0] / base_tar:12.2f}")
    print(f"{'push (s)':22}{rows['kit'][1]:12.2f}{rows['pack'][1]:12.2f}")
    print(f"{'push / curl -T':22}{rows['kit'][1] / base_curl:12.2f}{rows['pack'][1] / base_curl:12.2f}")
    one_pass = stream["push"]
    print(
        f"pack --push (in process): {one_pass:.2f}s = {one_pass / (base_tar + base_curl):.2f}x (tar|sha256sum + curl -T); "
        f"disk written under KITOPS_HOME: {stream_disk} bytes; peak RSS {stream['rss'] / 1024:.0f} MiB"
    )
    print(
        f"kit pack --push (CLI): {cli_stream[0]:.2f}s, peak RSS {cli_stream[1] / 1024:.0f} MiB, "
        f"bytes written under KITOPS_HOME: {cli_stream[2]}"
    )
    print(
        f"sign + provenance (attest), same run: {stream['sign'] * 1000:.0f} ms = "
        f"{stream['sign'] / one_pass * 100:.2f}% of the pack-and-push; re-signing x4: "
        f"{', '.join(f'{x * 1000:.0f}' for x in stream['again'])} ms; "
        f"(decrypting a cosign key, scrypt N=32768, once per task: {stream['key'] * 1000:.0f} ms)"
    )


if __name__ == "__main__":
    main()
