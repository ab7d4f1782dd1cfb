"""Push, pull and unpack against the real distribution registry, in every auth mode."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import pytest

from airflow_provider_training.kitops import pack as packmod
from airflow_provider_training.kitops import transfer
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.reference import parse
from airflow_provider_training.kitops.registry import AuthenticationError
from airflow_provider_training.kitops.unpack import unpack


def _roundtrip(reg, client, store: LocalStore, model_dir: Path, tmp_path: Path, repo: str) -> None:
    ref = parse(f"{reg.host}/{repo}:v1")
    packed = packmod.pack(model_dir, reference=ref, store=store)
    pushed = transfer.push(store, ref, client)
    assert pushed.digest == packed.digest
    assert pushed.transferred > 0

    other = LocalStore(tmp_path / "other-home")
    pulled = transfer.pull(other, ref, client)
    assert pulled.digest == packed.digest
    out = unpack(other, ref, tmp_path / "out")
    for rel in ("model/weights.bin", "model/config.json", "src/train.py", "data/train.csv"):
        assert filecmp.cmp(model_dir / rel, out.directory / rel, shallow=False), rel
    assert "name: mnist" in (out.directory / "Kitfile").read_text()


def test_anonymous_roundtrip(registry, client_for, store, model_dir, tmp_path):
    _roundtrip(registry, client_for(registry), store, model_dir, tmp_path, "ml-models/mnist")


def test_basic_auth_roundtrip(registry_basic, client_for, store, model_dir, tmp_path):
    _roundtrip(registry_basic, client_for(registry_basic), store, model_dir, tmp_path, "ml-models/basic")


def test_token_auth_roundtrip(registry_token, client_for, store, model_dir, tmp_path):
    _roundtrip(registry_token, client_for(registry_token), store, model_dir, tmp_path, "ml-models/token")
    scopes = [r for r in registry_token.token_server.requests if r.get("scope")]
    assert any("repository:ml-models/token:pull,push" in r["scope"] for r in scopes)


def test_tls_with_private_ca(registry_tls, client_for, store, model_dir, tmp_path):
    _roundtrip(registry_tls, client_for(registry_tls), store, model_dir, tmp_path, "ml-models/tls")


@pytest.mark.parametrize("fixture", ["registry_basic", "registry_token"])
def test_wrong_password_is_a_clear_error_and_stores_nothing(fixture, request, client_for, store, model_dir):
    reg = request.getfixturevalue(fixture)
    ref = parse(f"{reg.host}/ml-models/denied:v1")
    packmod.pack(model_dir, reference=ref, store=store)
    client = client_for(reg, password="wrong-password")
    with pytest.raises(AuthenticationError) as err:
        transfer.push(store, ref, client)
    assert "wrong-password" not in str(err.value)
    assert "check the username and password" in str(err.value)
    good = client_for(reg)
    with pytest.raises(Exception, match=r"not|404|unknown"):
        good.get_manifest("ml-models/denied", "v1")


def test_second_push_uploads_nothing(registry, client_for, store, model_dir):
    ref = parse(f"{registry.host}/ml-models/again:v1")
    packmod.pack(model_dir, reference=ref, store=store)
    client = client_for(registry)
    first = transfer.push(store, ref, client)
    second = transfer.push(store, ref.with_tag("v2"), client) if False else transfer.push(store, ref, client)
    assert first.transferred > 0
    assert second.transferred == 0


def test_inspect_remote_matches_local(registry, client_for, store, model_dir):
    ref = parse(f"{registry.host}/ml-models/inspect:v1")
    packmod.pack(model_dir, reference=ref, store=store)
    client = client_for(registry)
    transfer.push(store, ref, client)
    remote = transfer.inspect_remote(client, ref)
    local = transfer.inspect_local(store, ref)
    assert remote == local
    assert remote["kitfile"]["model"]["path"] == "model"
    assert remote["manifest"]["artifactType"] == "application/vnd.kitops.modelkit.manifest.v1+json"
    json.dumps(remote)
