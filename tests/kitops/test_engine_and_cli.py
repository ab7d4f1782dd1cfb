"""The kit-binary engine (against a stand-in kit, and a real one when on PATH) and the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_training.kitops import transfer
from airflow_provider_training.kitops.engine import KIT_BINARY_SETTING, KitEngine, KitEngineError
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.reference import parse

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    log = tmp_path / "kit-calls.jsonl"
    exe = tmp_path / "bin" / "kit"
    exe.parent.mkdir()
    exe.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path[:0] = {[str(ROOT / 'src'), str(ROOT)]!r}\n"
        f"from tests.kitops.fake_kit import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    exe.chmod(0o755)
    monkeypatch.setenv("FAKE_KIT_LOG", str(log))
    monkeypatch.setenv("KITOPS_HOME", str(tmp_path / "kithome"))
    return exe, log


def _calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _engines(fake_kit: tuple[Path, Path]) -> list[KitEngine]:
    engines = [KitEngine(binary=str(fake_kit[0]))]
    real = shutil.which("kit")
    if real:
        engines.append(KitEngine(binary=real))
    return engines


def test_engine_pack_login_push_inspect(fake_kit, registry_basic, model_dir, tmp_path):
    _, log = fake_kit
    ref = f"{registry_basic.host}/ml-models/engine:v1"
    for engine in _engines(fake_kit):
        digest = engine.pack(model_dir, ref)
        engine.login(registry_basic.host, registry_basic.username, registry_basic.password, plain_http=True)
        assert engine.push(ref, plain_http=True) == digest
        assert engine.inspect(ref)["digest"] == digest
    calls = _calls(log)
    login = next(c for c in calls if c["argv"][0] == "login")
    assert registry_basic.password not in login["argv"]  # never in argv
    assert login["stdin"] == registry_basic.password
    assert "--password-stdin" in login["argv"]
    assert all("--progress" in c["argv"] and "none" in c["argv"] for c in calls)
    push = next(c for c in calls if c["argv"][0] == "push")
    assert push["argv"] == ["push", ref, "--progress", "none", "--plain-http"]
    # what the engine packed is in kit's store layout: the native side can read and verify it
    assert transfer.inspect_local(LocalStore(), parse(ref))["digest"] == digest


def test_engine_pack_with_kitfile_on_stdin(fake_kit, model_dir):
    exe, log = fake_kit
    kitfile = "manifestVersion: 1.0.0\nmodel:\n  path: model\n"
    KitEngine(binary=str(exe)).pack(model_dir, "localhost/stdin:v1", kitfile=kitfile)
    call = _calls(log)[-1]
    assert call["argv"][-2:] == ["-f", "-"] and call["stdin"] == kitfile


def test_engine_failure_and_missing_binary(fake_kit, monkeypatch):
    exe, _ = fake_kit
    with pytest.raises(KitEngineError, match="kit push failed"):
        KitEngine(binary=str(exe)).push("localhost/none:v1")
    monkeypatch.setenv(KIT_BINARY_SETTING, "/nonexistent/kit")
    with pytest.raises(KitEngineError, match=KIT_BINARY_SETTING):
        KitEngine().push("x/y:z")


def _cli(args: list[str], home: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KITOPS_HOME": str(home), "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_training.cli", "kit", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_cli_end_to_end(registry_token, model_dir, tmp_path):
    home = tmp_path / "home"
    ref = f"{registry_token.host}/ml-models/cli:v1"
    res = _cli(["pack", str(model_dir), "-t", ref], home)
    assert res.returncode == 0, res.stderr
    digest = res.stdout.split()[-1]
    bad = _cli(
        ["login", registry_token.host, "-u", registry_token.username, "--password-stdin", "--plain-http"],
        home,
        stdin="wrong\n",
    )
    assert bad.returncode == 1 and "authentication" in bad.stderr and "wrong" not in bad.stderr
    ok = _cli(
        ["login", registry_token.host, "-u", registry_token.username, "--password-stdin", "--plain-http"],
        home,
        stdin=registry_token.password + "\n",
    )
    assert ok.returncode == 0, ok.stderr
    creds = json.loads((home / "credentials.json").read_text())
    assert registry_token.host in creds["auths"]
    assert _cli(["push", ref, "--plain-http"], home).stdout.strip() == f"Pushed {digest}"
    other = tmp_path / "other"
    shutil.copy(home / "credentials.json", tmp_path / "c.json")
    (other).mkdir()
    shutil.copy(home / "credentials.json", other / "credentials.json")
    out = _cli(["unpack", ref, "-d", str(tmp_path / "out"), "--plain-http"], other)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "out/model/weights.bin").read_bytes() == (model_dir / "model/weights.bin").read_bytes()
    remote = json.loads(_cli(["inspect", ref, "--remote", "--plain-http"], other).stdout)
    assert remote["digest"] == digest
    listed = json.loads(_cli(["list", "--format", "json"], other).stdout)  # one array, as kit prints it
    assert listed[0]["repo"] == f"{registry_token.host}/ml-models/cli" and listed[0]["tags"] == ["v1"]


def test_cli_bad_reference_is_clear(tmp_path, model_dir):
    res = _cli(["pack", str(model_dir), "-t", "ccr.ccs.tencentyun.com/a/b/c:v1"], tmp_path / "h")
    assert res.returncode == 1
    assert "exactly <namespace>/<name>" in res.stderr
