"""Signature checks before a deploy (``InferenceServiceOperator(verify=…)``), kept apart from the
operator so the deploy module stays about InferenceServices."""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowException
from cryptography.hazmat.primitives.asymmetric import ec

from airflow_provider_training.kitops import keys, signing
from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.reference import DEFAULT_TAG, ReferenceError, parse
from airflow_provider_training.kitops.registry import RegistryError


def _public_key(verify_key: str | None, signing_conn_id: str | None) -> ec.EllipticCurvePublicKey:
    if verify_key:
        data, source = keys.key_bytes(verify_key, "verify_key")
        return keys.load_public_key(data, source)
    if signing_conn_id:
        from airflow_provider_training.hooks.signing import ModelKitSigningHook

        return ModelKitSigningHook(signing_conn_id).public_key()
    raise keys.KeyProblem(
        "verify=True needs verify_key (cosign.pub) or signing_conn_id (a modelkit_signing connection)"
    )


def verify_modelkit(
    storage_uri: str,
    *,
    registry_conn_id: str | None,
    verify_key: str | None,
    signing_conn_id: str | None,
    require_provenance: bool = False,
    check_layers: bool = True,
) -> tuple[str, signing.VerifyResult]:
    """Verify ``storage_uri`` (``kit://`` or a reference); returns the digest-pinned URI to deploy."""
    text = storage_uri.removeprefix("kit://")
    try:
        ref = parse(text, default_tag=DEFAULT_TAG, check_tcr=False)
    except ReferenceError as exc:
        raise AirflowException(f"storage_uri: {exc}") from None
    try:
        key = _public_key(verify_key, signing_conn_id)
        if registry_conn_id:
            from airflow_provider_training.hooks.registry import ModelKitRegistryHook

            client = ModelKitRegistryHook(registry_conn_id).get_conn(ref.registry)
        else:
            client = make_client(ref.registry)
        with client:
            result = signing.verify(
                client,
                ref,
                key,
                check_layers=check_layers,
                require_provenance=require_provenance,
            )
    except (keys.KeyProblem, signing.SignatureError, RegistryError) as exc:
        raise AirflowException(f"refusing to deploy {text}: {exc}") from None
    base = text.split("@", 1)[0]
    pinned = f"{base}@{result.digest}"
    return ("kit://" + pinned if storage_uri.startswith("kit://") else pinned), result
