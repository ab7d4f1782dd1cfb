"""Signing keys in the formats cosign reads and writes (sigstore/cosign ``pkg/cosign/keys.go``).

- Private keys: cosign's encrypted PEM (``ENCRYPTED SIGSTORE PRIVATE KEY`` or the older
  ``ENCRYPTED COSIGN PRIVATE KEY``: JSON ``{kdf: scrypt, cipher: nacl/secretbox, ciphertext}``
  around a PKCS #8 key, as go-securesystemslib's ``encrypted`` package writes it), plain or
  encrypted PKCS #8 (``PRIVATE KEY`` / ``ENCRYPTED PRIVATE KEY``) and SEC1 (``EC PRIVATE KEY``).
- Public keys: PKIX PEM (``PUBLIC KEY``), or an X.509 certificate whose validity is checked.

Only ECDSA P-256 with SHA-256 is used for signing (what ``cosign generate-key-pair`` makes).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

SIGSTORE_PEM = "ENCRYPTED SIGSTORE PRIVATE KEY"
COSIGN_PEM = "ENCRYPTED COSIGN PRIVATE KEY"
_PEM_RE = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\s*(.*?)\s*-----END \1-----", re.S)
# cosign's scrypt parameters (go-securesystemslib encrypted.Encrypt)
SCRYPT_N, SCRYPT_R, SCRYPT_P = 32768, 8, 1


class KeyProblem(ValueError):
    """A key that cannot be used; the message names the key's source and what to do."""


@dataclass(frozen=True)
class KeyPair:
    private_pem: bytes
    public_pem: bytes


def _pem_blocks(data: bytes) -> list[tuple[str, bytes]]:
    return [(m[1].decode(), base64.b64decode(b"".join(m[2].split()))) for m in _PEM_RE.finditer(data)]


def _pem(kind: str, der: bytes) -> bytes:
    body = base64.encodebytes(der).replace(b"\n", b"")
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return b"-----BEGIN " + kind.encode() + b"-----\n" + b"\n".join(lines) + b"\n-----END " + kind.encode() + b"-----\n"


def _secretbox() -> Any:
    try:
        from nacl.secret import SecretBox
    except ImportError as exc:  # pragma: no cover - pynacl is a dependency
        raise KeyProblem("reading cosign's encrypted keys needs PyNaCl (pip install pynacl)") from exc
    return SecretBox


def _kdf(password: bytes, salt: bytes, n: int, r: int, p: int) -> bytes:
    return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(password)


def encrypt_cosign(der_pkcs8: bytes, password: bytes) -> bytes:
    """``cosign generate-key-pair``'s private key file for a PKCS #8 key."""
    from nacl.utils import random as nacl_random

    box_cls = _secretbox()
    salt = os.urandom(32)
    nonce = nacl_random(box_cls.NONCE_SIZE)
    key = _kdf(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    ciphertext = box_cls(key).encrypt(der_pkcs8, nonce).ciphertext
    doc = {
        "kdf": {
            "name": "scrypt",
            "params": {"N": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P},
            "salt": base64.b64encode(salt).decode(),
        },
        "cipher": {"name": "nacl/secretbox", "nonce": base64.b64encode(nonce).decode()},
        "ciphertext": base64.b64encode(ciphertext).decode(),
    }
    return _pem(SIGSTORE_PEM, json.dumps(doc, separators=(",", ":")).encode())


def _decrypt_cosign(blob: bytes, password: bytes, source: str) -> bytes:
    try:
        doc = json.loads(blob)
        kdf, cipher = doc["kdf"], doc["cipher"]
        if kdf.get("name") != "scrypt" or cipher.get("name") != "nacl/secretbox":
            raise KeyProblem(f"{source}: unsupported cosign key encryption ({kdf.get('name')}, {cipher.get('name')})")
        params = kdf["params"]
        key = _kdf(password, base64.b64decode(kdf["salt"]), int(params["N"]), int(params["r"]), int(params["p"]))
        nonce, ciphertext = base64.b64decode(cipher["nonce"]), base64.b64decode(doc["ciphertext"])
    except (ValueError, KeyError, TypeError) as exc:
        raise KeyProblem(f"{source}: the cosign key file is damaged ({type(exc).__name__}: {exc})") from None
    from nacl.exceptions import CryptoError

    try:
        return bytes(_secretbox()(key).decrypt(ciphertext, nonce))
    except CryptoError:
        raise KeyProblem(f"{source}: wrong password for the cosign private key (decryption failed)") from None


def load_private_key(
    data: bytes, password: str | bytes | None, source: str = "private key"
) -> ec.EllipticCurvePrivateKey:
    """An ECDSA P-256 private key from cosign's or a plain PEM; errors name ``source``."""
    pw = password.encode() if isinstance(password, str) else password
    blocks = _pem_blocks(data)
    if not blocks:
        raise KeyProblem(f"{source}: no PEM private key found (expected a cosign.key or a PKCS #8 PEM)")
    kind, der = blocks[0]
    try:
        if kind in (SIGSTORE_PEM, COSIGN_PEM):
            if not pw:
                raise KeyProblem(f"{source}: the cosign private key is encrypted; give its password")
            key = serialization.load_der_private_key(_decrypt_cosign(der, pw, source), None)
        elif kind == "ENCRYPTED PRIVATE KEY":
            if not pw:
                raise KeyProblem(f"{source}: the private key is encrypted; give its password")
            key = serialization.load_der_private_key(der, pw)
        elif kind in ("PRIVATE KEY", "EC PRIVATE KEY"):
            key = serialization.load_pem_private_key(data[data.index(b"-----BEGIN") :], None)
        else:
            raise KeyProblem(f"{source}: PEM block {kind!r} is not a private key")
    except KeyProblem:
        raise
    except (ValueError, TypeError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "password" in msg.lower() or "decrypt" in msg.lower():
            raise KeyProblem(f"{source}: wrong password for the private key") from None
        raise KeyProblem(f"{source}: unreadable private key ({msg})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise KeyProblem(f"{source}: only ECDSA P-256 keys are supported (as cosign generate-key-pair makes)")
    return key


def load_public_key(
    data: bytes, source: str = "public key", now: dt.datetime | None = None
) -> ec.EllipticCurvePublicKey:
    """A public key from PKIX PEM, or from an X.509 certificate that is valid now."""
    blocks = _pem_blocks(data)
    if not blocks:
        raise KeyProblem(f"{source}: no PEM public key found (expected cosign.pub: -----BEGIN PUBLIC KEY-----)")
    kind, der = blocks[0]
    key: Any
    try:
        if kind == "CERTIFICATE":
            cert = x509.load_der_x509_certificate(der)
            moment = now or dt.datetime.now(dt.timezone.utc)
            if moment > cert.not_valid_after_utc:
                raise KeyProblem(
                    f"{source}: the key's certificate expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC; "
                    "get a current key"
                )
            if moment < cert.not_valid_before_utc:
                raise KeyProblem(f"{source}: the key's certificate is not valid before {cert.not_valid_before_utc}")
            key = cert.public_key()
        elif kind == "PUBLIC KEY":
            key = serialization.load_der_public_key(der)
        else:
            raise KeyProblem(f"{source}: PEM block {kind!r} is not a public key")
    except KeyProblem:
        raise
    except (ValueError, TypeError) as exc:
        raise KeyProblem(f"{source}: unreadable public key ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise KeyProblem(f"{source}: only ECDSA keys are supported")
    return key


def read_key_file(path: str | Path, what: str) -> bytes:
    p = Path(path).expanduser()
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise KeyProblem(f"{what} file {p} does not exist") from None
    except OSError as exc:
        raise KeyProblem(f"{what} file {p} cannot be read: {exc.strerror}") from None


def key_bytes(value: str | bytes, what: str) -> tuple[bytes, str]:
    """PEM text as is, else the contents of the file it names; with a description for errors."""
    raw = value.encode() if isinstance(value, str) else value
    if b"-----BEGIN" in raw:
        return raw, f"{what} (PEM text)"
    return read_key_file(raw.decode(), what), f"{what} {raw.decode()}"


def generate_key_pair(password: str) -> KeyPair:
    """A new ECDSA P-256 pair as ``cosign generate-key-pair`` writes it (encrypted private key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return KeyPair(encrypt_cosign(der, password.encode()), public)


def public_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def sign(key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    """ECDSA P-256 / SHA-256, ASN.1 DER (cosign's signature encoding)."""
    return key.sign(data, ec.ECDSA(hashes.SHA256()))


def verify(key: ec.EllipticCurvePublicKey, signature: bytes, data: bytes) -> bool:
    try:
        key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True
