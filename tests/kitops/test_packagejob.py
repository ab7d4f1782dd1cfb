"""The packaging Job's script and manifest (``kitops.packagejob``), run by a real ``sh`` against a
stand-in ``kit`` that records argv and stdin, and the reading of its log."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from airflow_provider_training.kitops.packagejob import (
    INSPECT_BEGIN,
    INSPECT_END,
    PackageJob,
    PackageLogError,
    manifest,
    parse_log,
)

DIGEST = "sha256:" + "ab" * 32
MANIFEST = {"schemaVersion": 2, "config": {"size": 10}, "layers": [{"size": 5}, {"size": 7}]}


def _run(job: PackageJob, tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """Run the Job's script with the container's plain env values and a recording ``kit``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.jsonl"
    (bin_dir / "kit").write_text(
        "#!/usr/bin/env python3\nimport json, sys\n"
        "stdin = '' if sys.stdin.isatty() else sys.stdin.read()\n"
        f"open({str(calls)!r}, 'a').write(json.dumps({{'argv': sys.argv[1:], 'stdin': stdin}}) + '\\n')\n"
        f"print('Pushed {DIGEST}' if sys.argv[1] == 'push' else '')\n"
    )
    (bin_dir / "kit").chmod(0o755)
    (container,) = manifest(job)["spec"]["template"]["spec"]["containers"]
    values = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    values["MODELKIT_SOURCE"] = str(tmp_path)  # the claim's mount, here
    done = subprocess.run(
        container["command"],
        env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **values, **env},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )
    lines = calls.read_text().splitlines() if calls.exists() else []
    return done, [json.loads(line) for line in lines]


def test_password_reaches_kit_on_stdin_only(tmp_path: Path) -> None:
    job = PackageJob("j", "ns", "out", "run1", "reg:5000/ml/m:v1", "reg:5000", secret="creds", plain_http=True,
                     kitfile="manifestVersion: 1.0.0\nmodel:\n  path: m\n", compression="gzip")  # fmt: skip
    done, calls = _run(job, tmp_path, {"KIT_USER": "trainer", "KIT_PASSWORD": "pa ss'$word"})
    assert done.returncode == 0, done.stderr
    assert [c["argv"] for c in calls] == [
        ["login", "reg:5000", "-u", "trainer", "--password-stdin", "--plain-http"],
        ["pack", str(tmp_path), "-t", "reg:5000/ml/m:v1", "--compression", "gzip", "-f", "-"],
        ["push", "reg:5000/ml/m:v1", "--plain-http"],
        ["inspect", "reg:5000/ml/m:v1"],
    ]
    assert calls[0]["stdin"] == "pa ss'$word\n"  # quoted user input survives the shell untouched
    assert calls[1]["stdin"] == "manifestVersion: 1.0.0\nmodel:\n  path: m\n"
    (container,) = manifest(job)["spec"]["template"]["spec"]["containers"]
    assert {"name": "KIT_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "KIT_PASSWORD"}}} in (
        container["env"]
    )


def test_anonymous_push_skips_login_and_a_missing_directory_is_named(tmp_path: Path) -> None:
    job = PackageJob("j", "ns", "out", "", "reg/ml/m:v1", "reg")
    done, calls = _run(job, tmp_path, {})
    assert done.returncode == 0 and [c["argv"][0] for c in calls] == ["pack", "push", "inspect"]
    (tmp_path / "second").mkdir()
    done, calls = _run(job, tmp_path / "second", {"MODELKIT_SOURCE": str(tmp_path / "nothing")})
    assert done.returncode == 2 and calls == []
    assert "does not exist in PersistentVolumeClaim out" in done.stderr


def test_parse_log_reads_digest_and_manifest_around_kit_noise() -> None:
    inspect = json.dumps({"digest": DIGEST, "manifest": MANIFEST}, indent=2)
    log = f"Log in successful\nModel saved: {DIGEST}\nPushed {DIGEST}\n{INSPECT_BEGIN}\nA new kit is out\n{inspect}\n{INSPECT_END}\n"
    out = parse_log(log)
    assert out.digest == DIGEST and out.manifest == MANIFEST
    assert out.size == len(json.dumps(MANIFEST, separators=(",", ":"))) + 22
    assert parse_log(f"Pushed {DIGEST}\n").manifest is None
    with pytest.raises(PackageLogError, match="no 'Pushed sha256"):
        parse_log("Error: something\n")
    other = json.dumps({"digest": "sha256:" + "cd" * 32, "manifest": MANIFEST})
    with pytest.raises(PackageLogError, match="inspect reports"):
        parse_log(f"Pushed {DIGEST}\n{INSPECT_BEGIN}\n{other}\n{INSPECT_END}\n")


def test_the_packaging_pod_gets_no_service_account_token() -> None:
    """It talks to the registry only: no token beside the registry credentials (least privilege)."""
    job = PackageJob(
        name="p", namespace="ml", claim="c", path="out", reference="r.example/ns/repo:v1", registry="r.example"
    )
    assert manifest(job)["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
