"""Signed ModelKits against the real registry: cosign's key files and signature layout, provenance
attestations, verification, tampering and bad input."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from airflow_provider_training.cli.main import main as cli
from airflow_provider_training.kitops import keys, provenance, signing, transfer
from airflow_provider_training.kitops import pack as packmod
from airflow_provider_training.kitops.reference import parse

PASSWORD = "correct horse"


@pytest.fixture(scope="module")
def key_pair() -> keys.KeyPair:
    return keys.generate_key_pair(PASSWORD)


@pytest.fixture
def signed(registry, client_for, store, model_dir, key_pair, request):
    """A pushed ModelKit, signed and attested; returns (client, reference, digest). Its content is
    unique to the test: tampering tests edit the registry's shared blob storage."""
    (model_dir / "model/test.txt").write_text(request.node.name)
    ref = parse(f"{registry.host}/ml-models/signed:{request.node.name[5:40].replace('_', '-')}")
    packmod.pack(model_dir, reference=ref, store=store)
    client = client_for(registry)
    pushed = transfer.push(store, ref, client)
    key = keys.load_private_key(key_pair.private_pem, PASSWORD)
    signing.sign(client, ref, pushed.digest, key)
    facts = provenance.BuildFacts(dag_id="train_package_deploy", run_id="manual__1", task_ids=["train", "package"])
    statement = provenance.statement(f"{ref.registry}/{ref.repository}", pushed.digest, facts, pushed.layers, str(ref))
    signing.attest(client, ref, pushed.digest, key, statement)
    return client, ref, pushed.digest


def _public(key_pair: keys.KeyPair) -> ec.EllipticCurvePublicKey:
    return keys.load_public_key(key_pair.public_pem)


def test_key_files_are_cosigns_format(key_pair):
    text = key_pair.private_pem.decode()
    assert text.startswith("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
    body = json.loads(base64.b64decode("".join(text.splitlines()[1:-1])))
    assert body["kdf"]["name"] == "scrypt" and body["kdf"]["params"] == {"N": 32768, "r": 8, "p": 1}
    assert body["cipher"]["name"] == "nacl/secretbox" and len(base64.b64decode(body["cipher"]["nonce"])) == 24
    key = keys.load_private_key(key_pair.private_pem, PASSWORD)
    assert key.curve.name == "secp256r1"
    assert key_pair.public_pem.startswith(b"-----BEGIN PUBLIC KEY-----")
    assert keys.public_pem(key) == key_pair.public_pem
    # the older PEM name is read too
    legacy = key_pair.private_pem.replace(b"SIGSTORE", b"COSIGN")
    assert keys.load_private_key(legacy, PASSWORD).private_numbers() == key.private_numbers()


def test_signature_layout_is_cosigns(signed, registry, key_pair):
    client, ref, digest = signed
    hexpart = digest.split(":")[1]
    data, _ = client.get_manifest(ref.repository, f"sha256-{hexpart}.sig")
    manifest = json.loads(data)
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    [layer] = manifest["layers"]
    assert layer["mediaType"] == "application/vnd.dev.cosign.simplesigning.v1+json"
    payload = client.get_blob_bytes(ref.repository, layer["digest"])
    assert json.loads(payload) == {
        "critical": {
            "identity": {"docker-reference": f"{registry.host}/{ref.repository}"},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": None,
    }
    signature = base64.b64decode(layer["annotations"]["dev.cosignproject.cosign/signature"])
    _public(key_pair).verify(signature, payload, ec.ECDSA(hashes.SHA256()))  # plain ECDSA P-256/SHA-256 (DER)
    config = json.loads(client.get_blob_bytes(ref.repository, manifest["config"]["digest"]))
    assert config["rootfs"] == {"type": "layers", "diff_ids": [layer["digest"]]}
    # attestation: DSSE envelope under .att
    att = json.loads(client.get_manifest(ref.repository, f"sha256-{hexpart}.att")[0])
    assert att["layers"][0]["mediaType"] == "application/vnd.dsse.envelope.v1+json"
    assert att["layers"][0]["annotations"]["predicateType"] == "https://slsa.dev/provenance/v1"
    # this registry (distribution 2.8) has no referrers API: the tag scheme is the fallback
    assert not signing.referrers_supported(client, ref.repository, digest)


def test_verify_passes_and_reads_provenance(signed, key_pair):
    client, ref, digest = signed
    res = signing.verify(client, ref, _public(key_pair), require_provenance=True)
    assert res.digest == digest and res.signatures == 1 and res.layers_checked == 4
    assert res.provenance is not None
    assert res.provenance["subject"][0]["digest"] == {"sha256": digest.split(":")[1]}
    assert res.provenance["predicate"]["buildDefinition"]["internalParameters"]["run_id"] == "manual__1"


def _flip(path: Path, offset: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    i = len(data) // 2 if offset is None else offset
    data[i] ^= 0x01
    path.write_bytes(bytes(data))


def test_tampered_layer_fails(signed, registry, key_pair):
    client, ref, digest = signed
    manifest = json.loads(client.get_manifest(ref.repository, digest)[0])
    weights = manifest["layers"][0]["digest"]
    _flip(registry.blob_data(weights))
    with pytest.raises(signing.SignatureError, match=rf"{weights}.*tampered"):
        signing.verify(client, ref, _public(key_pair))


def test_tampered_manifest_fails(signed, registry, key_pair):
    client, ref, digest = signed
    _flip(registry.blob_data(digest), offset=60)
    with pytest.raises(signing.SignatureError, match=r"not signed|tampered"):
        signing.verify(client, ref, _public(key_pair))
    with pytest.raises(signing.SignatureError, match="tampered"):
        signing.verify(client, parse(f"{ref.registry}/{ref.repository}@{digest}"), _public(key_pair))


def test_tampered_provenance_fails(signed, key_pair):
    client, ref, digest = signed
    hexpart = digest.split(":")[1]
    att = json.loads(client.get_manifest(ref.repository, f"sha256-{hexpart}.att")[0])
    envelope = json.loads(client.get_blob_bytes(ref.repository, att["layers"][0]["digest"]))
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["buildDefinition"]["internalParameters"]["run_id"] = "forged"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    forged = json.dumps(envelope).encode()
    att["layers"][0].update(digest=client.push_bytes(ref.repository, forged), size=len(forged))
    client.put_manifest(ref.repository, f"sha256-{hexpart}.att", json.dumps(att).encode())
    with pytest.raises(signing.SignatureError, match=r"provenance.*not signed by this key"):
        signing.verify(client, ref, _public(key_pair))


def test_wrong_key_missing_and_corrupted_signatures(signed, registry, store, model_dir, client_for, key_pair):
    client, ref, digest = signed
    other = keys.load_public_key(keys.generate_key_pair("x").public_pem)
    with pytest.raises(signing.SignatureError, match=r"no valid signature by this key.*does not verify"):
        signing.verify(client, ref, other)

    unsigned = parse(f"{ref.registry}/{ref.repository}:unsigned")
    (model_dir / "model/extra.txt").write_text("new")
    packmod.pack(model_dir, reference=unsigned, store=store)
    transfer.push(store, unsigned, client)
    with pytest.raises(signing.SignatureError, match=r"is not signed: no signature at tag sha256-[0-9a-f]{64}\.sig"):
        signing.verify(client, unsigned, _public(key_pair))

    hexpart = digest.split(":")[1]
    sig = json.loads(client.get_manifest(ref.repository, f"sha256-{hexpart}.sig")[0])
    _flip(registry.blob_data(sig["layers"][0]["digest"]))  # the signed payload blob
    with pytest.raises(signing.SignatureError, match=r"signature payload blob .* corrupted"):
        signing.verify(client, ref, _public(key_pair))
    sig["layers"][0]["annotations"]["dev.cosignproject.cosign/signature"] = "%%%not-base64"
    client.put_manifest(ref.repository, f"sha256-{hexpart}.sig", json.dumps(sig).encode())
    with pytest.raises(signing.SignatureError, match="corrupted signature"):
        signing.verify(client, ref, _public(key_pair))


def _certificate(key: ec.EllipticCurvePrivateKey, days: int) -> bytes:
    now = dt.datetime.now(dt.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "signer")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(days=30))
        .not_valid_after(now + dt.timedelta(days=days))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def test_bad_keys_are_clear_errors(key_pair, tmp_path):
    with pytest.raises(keys.KeyProblem, match="wrong password"):
        keys.load_private_key(key_pair.private_pem, "nope", "private key cosign.key")
    with pytest.raises(keys.KeyProblem, match="is encrypted; give its password"):
        keys.load_private_key(key_pair.private_pem, None)
    with pytest.raises(keys.KeyProblem, match="does not exist"):
        keys.read_key_file(tmp_path / "missing.key", "private key")
    damaged = key_pair.private_pem.replace(key_pair.private_pem.splitlines()[2], b"A" * 64)
    with pytest.raises(keys.KeyProblem, match=r"damaged|wrong password"):
        keys.load_private_key(damaged, PASSWORD)
    with pytest.raises(keys.KeyProblem, match="no PEM"):
        keys.load_public_key(b"garbage")
    private = keys.load_private_key(key_pair.private_pem, PASSWORD)
    with pytest.raises(keys.KeyProblem, match="certificate expired on"):
        keys.load_public_key(_certificate(private, days=-1), "key signer.crt")
    assert keys.load_public_key(_certificate(private, days=10)).public_numbers() == _public(key_pair).public_numbers()
    rsa_pem = (
        b"-----BEGIN PRIVATE KEY-----\n"
        + base64.encodebytes(
            __import__("cryptography.hazmat.primitives.asymmetric.rsa", fromlist=["x"])
            .generate_private_key(65537, 2048)
            .private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
        + b"-----END PRIVATE KEY-----\n"
    )
    with pytest.raises(keys.KeyProblem, match="only ECDSA P-256"):
        keys.load_private_key(rsa_pem, None)


def test_cli_keygen_sign_verify_inspect_provenance(registry, store, model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KITOPS_HOME", str(store.home))
    monkeypatch.setenv("COSIGN_PASSWORD", PASSWORD)
    monkeypatch.chdir(tmp_path)
    assert cli(["kit", "keygen"]) == 0
    assert (tmp_path / "cosign.key").stat().st_mode & 0o777 == 0o600
    ref = f"{registry.host}/ml-models/cli-signed:v1"
    assert cli(["kit", "pack", str(model_dir), "-t", ref, "--push", "--plain-http"]) == 0
    capsys.readouterr()
    assert cli(["kit", "verify", ref, "--key", "cosign.pub", "--plain-http"]) == 1
    assert "is not signed" in capsys.readouterr().err
    assert cli(["kit", "sign", ref, "--key", "cosign.key", "--plain-http"]) == 0
    assert "(registry has no referrers API)" in capsys.readouterr().out
    assert cli(["kit", "verify", ref, "--key", "cosign.pub", "--plain-http"]) == 0
    assert "1 valid signature(s)" in capsys.readouterr().out
    assert cli(["kit", "inspect", ref, "--provenance", "--plain-http"]) == 1
    assert "no provenance attestation" in capsys.readouterr().err
    monkeypatch.setenv("COSIGN_PASSWORD", "wrong")
    assert cli(["kit", "sign", ref, "--key", "cosign.key", "--plain-http"]) == 1
    err = capsys.readouterr().err
    assert "wrong password" in err and "wrong\n" not in err
