"""``ModelKitRegistryHook``: the ``modelkit_registry`` connection (host, login, password, plain-HTTP,
TLS verify, CA certificate) turned into a registry client for the ModelKit operators."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.credentials import Credential
from airflow_provider_training.kitops.registry import RegistryClient, RegistryError, RegistryOptions


def _flag(value: Any, default: bool) -> bool:
    if value is None or value == "":
        return default
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


class ModelKitRegistryHook(BaseHook):
    conn_name_attr = "registry_conn_id"
    default_conn_name = "modelkit_registry_default"
    conn_type = "modelkit_registry"
    hook_name = "ModelKit Registry (OCI / TCR)"

    def __init__(self, registry_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.registry_conn_id = registry_conn_id
        self._conn: Any = None

    @property
    def connection(self) -> Any:
        if self._conn is None:
            self._conn = self.get_connection(self.registry_conn_id)
        return self._conn

    @property
    def registry(self) -> str:
        conn = self.connection
        host = (conn.host or "").strip()
        for scheme in ("https://", "http://"):
            if host.startswith(scheme):
                host = host[len(scheme) :]
        host = host.rstrip("/")
        if not host:
            raise ValueError(
                f"connection {self.registry_conn_id!r} has no host (set it to the registry, "
                "e.g. ccr.ccs.tencentyun.com)"
            )
        return f"{host}:{conn.port}" if conn.port and ":" not in host else host

    @property
    def options(self) -> dict[str, Any]:
        extra = self.connection.extra_dejson or {}
        return {
            "plain_http": _flag(extra.get("plain_http"), False) or (self.connection.host or "").startswith("http://"),
            "tls_verify": _flag(extra.get("tls_verify"), True),
            "ca_cert": extra.get("ca_cert") or None,
        }

    @property
    def credential(self) -> Credential | None:
        conn = self.connection
        if not (conn.login or conn.password):
            return None
        if conn.login:
            return Credential(conn.login, conn.password or "")
        return Credential(identity_token=conn.password)

    def secret_data(self) -> dict[str, str]:
        """The connection as the keys of a ``kitops-credentials`` Secret, which KitOps' containers read
        (``KIT_USER``, ``KIT_PASSWORD``, ``KIT_UNPACK_FLAGS``, ``KIT_CA_CERT``): the deploy operator's
        storage initializer and the packaging Job write and read the same Secret."""
        opts = self.options
        flags = []
        if opts["plain_http"]:
            flags.append("--plain-http")
        if not opts["tls_verify"]:
            flags.append("--tls-verify=false")
        data = {"KIT_UNPACK_FLAGS": " ".join(flags)}
        credential = self.credential
        if credential is not None:
            data["KIT_USER"] = credential.username
            data["KIT_PASSWORD"] = credential.password or credential.identity_token
        if opts["ca_cert"]:
            data["KIT_CA_CERT"] = str(opts["ca_cert"])
        return data

    def get_conn(self, registry: str | None = None, *, options: RegistryOptions | None = None) -> RegistryClient:
        """A client for ``registry`` (default: the connection's host) with the connection's credentials;
        ``options`` for its retries and timeout (``RegistryOptions.single_attempt()`` for a read that is
        only shown), the connection's TLS settings win."""
        opts = self.options
        return make_client(
            registry or self.registry,
            plain_http=opts["plain_http"],
            tls_verify=opts["tls_verify"],
            ca_cert=opts["ca_cert"],
            credential=self.credential,
            options=options,
        )

    def test_connection(self) -> tuple[bool, str]:
        try:
            with self.get_conn() as client:
                client.ping()
        except (RegistryError, ValueError, OSError) as exc:
            return False, str(exc)
        return True, f"Registry {self.registry} is reachable and accepted the credentials"
