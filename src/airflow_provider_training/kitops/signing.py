"""Signatures and attestations of ModelKits, stored where ``cosign`` looks for them.

Layout: sigstore/cosign ``specs/SIGNATURE_SPEC.md`` and ``specs/ATTESTATION_SPEC.md`` as of cosign
v3.1.2 (the "legacy" tag-based format, which ``cosign verify`` still reads when a registry holds no
Sigstore bundles):

- signature: tag ``sha256-<hex>.sig`` in the ModelKit's repository, an OCI image manifest whose
  layers are simple-signing payloads (``application/vnd.dev.cosign.simplesigning.v1+json``:
  ``{"critical":{"identity":{"docker-reference":…},"image":{"docker-manifest-digest":…},
  "type":"cosign container image signature"},"optional":…}``) with the base64 ECDSA P-256/SHA-256
  signature in the layer annotation ``dev.cosignproject.cosign/signature``;
- attestation: tag ``sha256-<hex>.att``, layers ``application/vnd.dsse.envelope.v1+json`` holding a
  DSSE envelope around an in-toto statement, annotated with ``predicateType``.

When the registry implements the OCI 1.1 referrers API, the same manifests are also pushed by
digest with ``subject`` set to the ModelKit, so ``GET /v2/<repo>/referrers/<digest>`` lists them;
Debian's docker-registry (distribution 2.8) does not, and the tag scheme is then the only place.

Verify with cosign (no transparency log is involved in key-based signing here)::

    cosign verify --key cosign.pub --insecure-ignore-tlog=true REGISTRY/REPO@sha256:…
    cosign verify-attestation --key cosign.pub --insecure-ignore-tlog=true --type slsaprovenance1 REGISTRY/REPO@sha256:…
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from airflow_provider_training.kitops import keys, mediatypes
from airflow_provider_training.kitops.reference import Reference
from airflow_provider_training.kitops.registry import (
    DigestMismatchError,
    NotFoundError,
    RegistryClient,
    RegistryError,
)
from airflow_provider_training.kitops.transfer import fetch_manifest
from airflow_provider_training.specs.gojson import go_json

log = logging.getLogger(__name__)

COSIGN_SPEC = "sigstore/cosign specs/SIGNATURE_SPEC.md + ATTESTATION_SPEC.md, cosign v3.1.2 (tag-based discovery)"
SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
DSSE_ENVELOPE = "application/vnd.dsse.envelope.v1+json"
IN_TOTO = "application/vnd.in-toto+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
SIG_ARTIFACT_TYPE = "application/vnd.dev.cosign.artifact.sig.v1+json"
ANNOTATION_SIGNATURE = "dev.cosignproject.cosign/signature"
ANNOTATION_PREDICATE = "predicateType"
SIGNATURE_TYPE = "cosign container image signature"


class SignatureError(RuntimeError):
    """Verification failed; the message says what is missing or wrong, for which digest."""


@dataclass
class SignResult:
    reference: str
    digest: str  # the signed ModelKit manifest digest
    tag: str  # sha256-<hex>.sig / .att
    manifest_digest: str  # of the signature (or attestation) manifest
    referrers: bool  # also pushed as an OCI 1.1 referrer


@dataclass
class VerifyResult:
    reference: str
    digest: str
    signatures: int  # valid signatures by the key
    layers_checked: int
    provenance: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def _hex(digest: str) -> str:
    algo, _, hexpart = digest.partition(":")
    if algo != "sha256" or len(hexpart) != 64:
        raise ValueError(f"not a sha256 digest: {digest!r}")
    return hexpart


def sig_tag(digest: str) -> str:
    return f"sha256-{_hex(digest)}.sig"


def att_tag(digest: str) -> str:
    return f"sha256-{_hex(digest)}.att"


def simple_signing_payload(repository: str, digest: str, optional: dict[str, str] | None = None) -> bytes:
    """The payload cosign signs (Go JSON of sigstore's ``payload.SimpleContainerImage``)."""
    return go_json(
        {
            "critical": {
                "identity": {"docker-reference": repository},
                "image": {"docker-manifest-digest": digest},
                "type": SIGNATURE_TYPE,
            },
            "optional": dict(sorted(optional.items())) if optional else None,
        }
    )


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding — what an attestation's signature covers."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _image_config(layer_digests: list[str]) -> bytes:
    """The (empty) image config go-containerregistry writes for cosign's signature images."""
    zero = "0001-01-01T00:00:00Z"
    return go_json(
        {
            "architecture": "",
            "created": zero,
            "history": [{"created": zero} for _ in layer_digests],
            "os": "",
            "rootfs": {"type": "layers", "diff_ids": layer_digests},
            "config": {},
        }
    )


def _manifest(layers: list[dict[str, Any]], config: bytes, subject: dict[str, Any] | None) -> bytes:
    doc: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": mediatypes.MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": _sha(config), "size": len(config)},
        "layers": layers,
    }
    if subject is not None:
        doc["artifactType"] = SIG_ARTIFACT_TYPE if layers and layers[0]["mediaType"] == SIMPLE_SIGNING else IN_TOTO
        doc["subject"] = subject
    return go_json(doc)


def _parallel(*calls: Any) -> list[Any]:
    """Run independent registry requests at once (the registry's latency, not our CPU, is the cost)."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]


def _existing_layers(client: RegistryClient, repo: str, tag: str) -> list[dict[str, Any]]:
    try:
        data, _ = client.get_manifest(repo, tag)
    except NotFoundError:
        return []
    try:
        return list(json.loads(data).get("layers") or [])
    except ValueError:
        return []  # an unreadable signature manifest is replaced


def referrers_supported(client: RegistryClient, repo: str, digest: str) -> bool:
    """Whether the registry implements ``GET /v2/<repo>/referrers/<digest>`` (OCI distribution 1.1);
    asked once per client and repository."""
    cache: dict[str, bool] = client.__dict__.setdefault("_referrers_supported", {})
    if repo in cache:
        return cache[repo]
    try:
        resp = client.request("GET", f"/v2/{repo}/referrers/{digest}", scope=f"repository:{repo}:pull")
    except RegistryError:
        return False
    try:
        supported = resp.status_code == 200 and resp.headers.get("Content-Type", "").startswith(mediatypes.INDEX)
    finally:
        resp.close()
    cache[repo] = supported
    return supported


def _attach(
    client: RegistryClient,
    ref: Reference,
    digest: str,
    tag: str,
    layer: dict[str, Any],
    blob: bytes,
    subject_size: int | None,
) -> SignResult:
    """Upload ``blob`` (the layer's content) and add ``layer`` to the manifest at ``tag`` (cosign
    appends to the signatures already there); also as an OCI referrer where the registry has the API."""
    repo = ref.repository
    # the blobs go up while the existing signatures are read: the config assumes this is the first
    # signature (the usual case) and is uploaded again only when it is not
    first_config = _image_config([layer["digest"]])
    existing, supported, _, _ = _parallel(
        lambda: _existing_layers(client, repo, tag),
        lambda: referrers_supported(client, repo, digest),
        lambda: client.push_bytes(repo, blob),
        lambda: client.push_bytes(repo, first_config),
    )
    layers = [x for x in existing if x.get("digest") != layer["digest"]]
    layers.append(layer)
    config = _image_config([x["digest"] for x in layers])
    if config != first_config:
        client.push_bytes(repo, config)
    manifest_digest = client.put_manifest(repo, tag, _manifest(layers, config, None))
    if supported:
        size = subject_size if subject_size is not None else _subject_size(client, ref, digest)
        subject = {"mediaType": mediatypes.MANIFEST, "digest": digest, "size": size}
        referrer = _manifest([layer], first_config, subject)
        client.put_manifest(repo, _sha(referrer), referrer)
    else:
        log.info("registry %s has no OCI referrers API: %s stored under tag %s only", ref.registry, digest, tag)
    return SignResult(f"{ref.registry}/{repo}", digest, tag, manifest_digest, supported)


def _subject_size(client: RegistryClient, ref: Reference, digest: str) -> int:
    data, _ = client.get_manifest(ref.repository, digest)
    return len(data)


def sign(
    client: RegistryClient,
    ref: Reference,
    digest: str,
    key: ec.EllipticCurvePrivateKey,
    optional: dict[str, str] | None = None,
    subject_size: int | None = None,
) -> SignResult:
    """Sign ModelKit ``ref``@``digest`` (already pushed) as ``cosign sign --key`` does
    (``subject_size``: the manifest's size, read from the registry when needed and not given)."""
    payload = simple_signing_payload(f"{ref.registry}/{ref.repository}", digest, optional)
    signature = base64.b64encode(keys.sign(key, payload)).decode()
    layer = {
        "mediaType": SIMPLE_SIGNING,
        "digest": _sha(payload),
        "size": len(payload),
        "annotations": {ANNOTATION_SIGNATURE: signature},
    }
    return _attach(client, ref, digest, sig_tag(digest), layer, payload, subject_size)


def attest(
    client: RegistryClient,
    ref: Reference,
    digest: str,
    key: ec.EllipticCurvePrivateKey,
    statement: dict[str, Any],
    subject_size: int | None = None,
) -> SignResult:
    """Attach an in-toto ``statement`` (subject = the ModelKit) as ``cosign attest --key`` does."""
    body = json.dumps(statement, separators=(",", ":"), sort_keys=True).encode()
    signature = keys.sign(key, pae(IN_TOTO, body))
    envelope = json.dumps(
        {
            "payloadType": IN_TOTO,
            "payload": base64.b64encode(body).decode(),
            "signatures": [{"keyid": "", "sig": base64.b64encode(signature).decode()}],
        },
        separators=(",", ":"),
    ).encode()
    layer = {
        "mediaType": DSSE_ENVELOPE,
        "digest": _sha(envelope),
        "size": len(envelope),
        "annotations": {ANNOTATION_SIGNATURE: "", ANNOTATION_PREDICATE: str(statement.get("predicateType", ""))},
    }
    return _attach(client, ref, digest, att_tag(digest), layer, envelope, subject_size)


def sign_and_attest(
    client: RegistryClient,
    ref: Reference,
    digest: str,
    key: ec.EllipticCurvePrivateKey,
    statement: dict[str, Any] | None,
    subject_size: int | None = None,
) -> tuple[SignResult, SignResult | None]:
    """Signature and (when ``statement`` is given) provenance, written concurrently."""
    if statement is None:
        return sign(client, ref, digest, key, subject_size=subject_size), None
    signed, attested = _parallel(
        lambda: sign(client, ref, digest, key, subject_size=subject_size),
        lambda: attest(client, ref, digest, key, statement, subject_size),
    )
    return signed, attested


# -- verification -------------------------------------------------------------------------------


def _blob(client: RegistryClient, repo: str, digest: str, what: str) -> bytes:
    try:
        return client.get_blob_bytes(repo, digest)
    except DigestMismatchError:
        raise SignatureError(f"{what} blob {digest} is corrupted (its bytes do not match its digest)") from None
    except NotFoundError:
        raise SignatureError(f"{what} blob {digest} is missing from the registry") from None


def _check_signature_layer(
    client: RegistryClient, repo: str, layer: dict[str, Any], digest: str, key: ec.EllipticCurvePublicKey
) -> str | None:
    """None when the layer is a valid signature of ``digest`` by ``key``, else why not."""
    encoded = (layer.get("annotations") or {}).get(ANNOTATION_SIGNATURE, "")
    try:
        signature = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return "the signature annotation is not base64 (corrupted signature)"
    if not signature:
        return "the signature annotation is empty"
    payload = _blob(client, repo, layer["digest"], "signature payload")
    if not keys.verify(key, signature, payload):
        return "the signature does not verify with this key"
    try:
        critical = json.loads(payload)["critical"]
        signed_digest = critical["image"]["docker-manifest-digest"]
        kind = critical["type"]
    except (ValueError, KeyError, TypeError):
        return "the signed payload is not a cosign simple-signing payload"
    if kind != SIGNATURE_TYPE:
        return f"the signed payload has type {kind!r}"
    if signed_digest != digest:
        return f"the signature is for {signed_digest}, not {digest}"
    return None


def verify_layers(client: RegistryClient, repo: str, manifest: dict[str, Any]) -> int:
    """Stream every blob of the ModelKit and check it against its digest (nothing is stored)."""
    blobs = [manifest["config"], *(manifest.get("layers") or [])]
    for blob in blobs:
        sha = hashlib.sha256()
        with client.open_blob_stream(repo, blob["digest"]) as fh:
            while chunk := fh.read(1 << 20):
                sha.update(chunk)
        if "sha256:" + sha.hexdigest() != blob["digest"]:
            raise SignatureError(
                f"layer {blob['digest']} ({blob.get('mediaType')}) in the registry does not match its digest: the "
                "ModelKit was tampered with after it was signed"
            )
    return len(blobs)


def read_provenance(
    client: RegistryClient, ref: Reference, digest: str, key: ec.EllipticCurvePublicKey | None = None
) -> dict[str, Any] | None:
    """The newest in-toto statement attached to ``digest`` (verified with ``key`` when given);
    None when there is none."""
    layers = [
        x for x in _existing_layers(client, ref.repository, att_tag(digest)) if x.get("mediaType") == DSSE_ENVELOPE
    ]
    if not layers:
        return None
    layer = layers[-1]
    envelope = _blob(client, ref.repository, layer["digest"], "provenance")
    try:
        env = json.loads(envelope)
        body = base64.b64decode(env["payload"], validate=True)
        sigs = [base64.b64decode(s["sig"], validate=True) for s in env.get("signatures") or []]
        statement: dict[str, Any] = json.loads(body)
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise SignatureError(f"the provenance attestation of {digest} is not a readable DSSE envelope") from None
    if key is not None:
        if env.get("payloadType") != IN_TOTO or not any(keys.verify(key, s, pae(IN_TOTO, body)) for s in sigs):
            raise SignatureError(f"the provenance attestation of {digest} is not signed by this key (tampered?)")
        subjects = [s.get("digest", {}).get("sha256") for s in statement.get("subject") or []]
        if _hex(digest) not in subjects:
            raise SignatureError(f"the provenance attestation attached to {digest} names other subjects {subjects}")
    return statement


def verify(
    client: RegistryClient,
    ref: Reference,
    key: ec.EllipticCurvePublicKey,
    *,
    check_layers: bool = True,
    require_provenance: bool = False,
) -> VerifyResult:
    """Check that ModelKit ``ref`` (tag or digest) carries a valid signature by ``key`` for its
    digest, that its blobs match the manifest (``check_layers``), and that its provenance, when
    present (or required), is signed by the same key. Raises :class:`SignatureError`."""
    try:
        _, digest, manifest = fetch_manifest(client, ref)
    except DigestMismatchError as exc:
        raise SignatureError(f"{exc}: the manifest was tampered with") from None
    repo = ref.repository
    where = f"{ref.registry}/{repo}@{digest}"
    try:
        sig_manifest, _ = client.get_manifest(repo, sig_tag(digest))
    except NotFoundError:
        raise SignatureError(
            f"{where} is not signed: no signature at tag {sig_tag(digest)} (sign it after the push, e.g. "
            f"'airflow-training kit sign {ref.registry}/{repo}@{digest} --key cosign.key')"
        ) from None
    try:
        layers = [x for x in json.loads(sig_manifest).get("layers") or [] if x.get("mediaType") == SIMPLE_SIGNING]
    except ValueError:
        raise SignatureError(f"the signature manifest of {where} is not JSON (corrupted)") from None
    if not layers:
        raise SignatureError(f"the signature manifest of {where} holds no cosign signature")
    problems = []
    valid = 0
    for layer in layers:
        problem = _check_signature_layer(client, repo, layer, digest, key)
        if problem is None:
            valid += 1
        else:
            problems.append(problem)
    if not valid:
        raise SignatureError(f"{where} has no valid signature by this key: {'; '.join(sorted(set(problems)))}")
    checked = verify_layers(client, repo, manifest) if check_layers else 0
    provenance = read_provenance(client, ref, digest, key)
    if provenance is None and require_provenance:
        raise SignatureError(f"{where} has no provenance attestation (tag {att_tag(digest)})")
    return VerifyResult(f"{ref.registry}/{repo}", digest, valid, checked, provenance)
