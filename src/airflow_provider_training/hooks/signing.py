"""``ModelKitSigningHook``: the ``modelkit_signing`` connection holding a cosign key pair.

Fields: **Password** = the private key's password; extras ``private_key`` (PEM text, e.g. the
contents of ``cosign.key``) or ``private_key_file`` (a path on the worker), and ``public_key`` /
``public_key_file`` for verification (derived from the private key when absent). Airflow masks
``password`` and ``private_key`` in logs and the UI.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook
from cryptography.hazmat.primitives.asymmetric import ec

from airflow_provider_training.kitops import keys


class ModelKitSigningHook(BaseHook):
    conn_name_attr = "signing_conn_id"
    default_conn_name = "modelkit_signing_default"
    conn_type = "modelkit_signing"
    hook_name = "ModelKit Signing Key (cosign)"

    def __init__(self, signing_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.signing_conn_id = signing_conn_id
        self._conn: Any = None

    @property
    def connection(self) -> Any:
        if self._conn is None:
            self._conn = self.get_connection(self.signing_conn_id)
        return self._conn

    def _extra(self, name: str) -> str | None:
        value = (self.connection.extra_dejson or {}).get(name)
        return str(value) if value else None

    def private_key(self) -> ec.EllipticCurvePrivateKey:
        pem, file = self._extra("private_key"), self._extra("private_key_file")
        where = f"connection {self.signing_conn_id!r}"
        if pem:
            data, source = pem.encode(), f"{where} (private_key)"
        elif file:
            data, source = keys.read_key_file(file, f"{where}: private key"), f"{where} (private_key_file {file})"
        else:
            raise keys.KeyProblem(f"{where} has no private_key or private_key_file extra")
        return keys.load_private_key(data, self.connection.password or None, source)

    def public_key(self) -> ec.EllipticCurvePublicKey:
        pem, file = self._extra("public_key"), self._extra("public_key_file")
        where = f"connection {self.signing_conn_id!r}"
        if pem:
            return keys.load_public_key(pem.encode(), f"{where} (public_key)")
        if file:
            return keys.load_public_key(keys.read_key_file(file, f"{where}: public key"), f"{where} ({file})")
        return self.private_key().public_key()
