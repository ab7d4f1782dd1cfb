"""High-level ModelKit operations shared by the CLI and the Airflow operators (native engine)."""

from __future__ import annotations

from pathlib import Path

from airflow_provider_training.kitops.credentials import Credential, load_credential, save_credential
from airflow_provider_training.kitops.registry import AuthenticationError, RegistryClient, RegistryOptions


def make_client(
    registry: str,
    *,
    plain_http: bool = False,
    tls_verify: bool = True,
    ca_cert: str | None = None,
    credential: Credential | None = None,
    home: Path | None = None,
    options: RegistryOptions | None = None,
) -> RegistryClient:
    """A client for ``registry`` with explicit credentials, else those stored by ``login``/Docker."""
    opts = options or RegistryOptions()
    opts.plain_http, opts.tls_verify, opts.ca_cert = plain_http, tls_verify, ca_cert
    cred = credential if credential and not credential.empty else load_credential(registry, home)
    return RegistryClient(registry, cred, opts)


def login(
    registry: str,
    username: str,
    password: str,
    *,
    plain_http: bool = False,
    tls_verify: bool = True,
    ca_cert: str | None = None,
    home: Path | None = None,
) -> Path:
    """Verify the credentials against the registry, then store them in kit's credentials.json."""
    if not password:
        raise AuthenticationError("an empty password was given (pass it on stdin with --password-stdin)")
    cred = Credential(username, password) if username else Credential(identity_token=password)
    with make_client(
        registry, plain_http=plain_http, tls_verify=tls_verify, ca_cert=ca_cert, credential=cred, home=home
    ) as client:
        client.ping()
    return save_credential(registry, cred, home)
