"""``InferenceServiceOperator(verify=…)`` in real DAG runs: a ModelKit signed by the expected key is
deployed pinned to its verified digest; an unsigned, wrongly signed or tampered one is refused with
a clear error and nothing is deployed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_training.kitops import keys, signing
from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.reference import parse
from tests.deploy.conftest import ISVC, delete_and_wait, task_states, xcoms

pytestmark = pytest.mark.slow
PASSWORD = "deploy-key-password"

DAG = """
from airflow.sdk import DAG
from airflow_provider_training.operators.deploy import InferenceServiceOperator

with DAG("{dag_id}", schedule=None):
    InferenceServiceOperator(
        task_id="deploy",
        name="{name}",
        namespace="{namespace}",
        storage_uri="{reference}",
        registry_conn_id="deploy_registry",
        verify={verify},
        signing_conn_id={signing_conn_id},
        poll_interval=0.5,
        timeout=120,
        log_tail_lines=5,
    )
"""


@pytest.fixture(scope="module")
def key_pair() -> keys.KeyPair:
    return keys.generate_key_pair(PASSWORD)


@pytest.fixture
def signing_connection(key_pair: keys.KeyPair, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(
        "AIRFLOW_CONN_DEPLOY_SIGNING",
        json.dumps(
            {
                "conn_type": "modelkit_signing",
                "password": PASSWORD,
                "extra": {"private_key": key_pair.private_pem.decode()},
            }
        ),
    )
    return "deploy_signing"


def _deploy(
    write_dag: Any, dag_id: str, name: str, namespace: str, reference: str, verify: str, conn: str | None
) -> Any:
    source = DAG.format(
        dag_id=dag_id,
        name=name,
        namespace=namespace,
        reference=reference,
        verify=verify,
        signing_conn_id=repr(conn),
    )
    return write_dag(source, dag_id).test()


def _isvc_exists(isvc_api: Any, namespace: str, name: str) -> bool:
    from kubernetes.client.rest import ApiException

    try:
        isvc_api.get_namespaced_custom_object(*ISVC[:2], namespace, ISVC[2], name)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def test_signed_model_deploys_pinned_to_its_digest(
    write_dag, airflow_db, embedded_default, registry_connection, signing_connection, digits_models, registry,
    key_pair, kube_api, isvc_api, test_namespace,
):  # fmt: skip
    model = digits_models["v1"]
    ref = parse(model.reference)
    with make_client(ref.registry, plain_http=True) as client:
        signing.sign(client, ref, model.digest, keys.load_private_key(key_pair.private_pem, PASSWORD))
    name = "digits-signed"
    try:
        run = _deploy(write_dag, "deploy_verified", name, test_namespace, model.reference, "True", signing_connection)
        assert task_states(run) == {"deploy": "success"}
        assert xcoms("deploy_verified", run.run_id)[("deploy", "verified_digest")] == model.digest
        obj = isvc_api.get_namespaced_custom_object(*ISVC[:2], test_namespace, ISVC[2], name)
        assert obj["spec"]["predictor"]["model"]["storageUri"] == f"kit://{model.reference}@{model.digest}"
    finally:
        delete_and_wait(kube_api, test_namespace, name)


def test_unsigned_wrong_key_and_tampered_are_refused(
    write_dag, airflow_db, embedded_default, registry_connection, signing_connection, digits_models, registry,
    key_pair, isvc_api, test_namespace, tmp_path: Path, capfd,
):  # fmt: skip
    model = digits_models["v2"]  # never signed by the session's key
    name = "digits-refused"

    unsigned = _deploy(write_dag, "deploy_unsigned", name, test_namespace, model.reference, "True", signing_connection)
    log = "".join(capfd.readouterr())
    assert task_states(unsigned) == {"deploy": "failed"}
    assert f"refusing to deploy {model.reference}" in log and "is not signed" in log
    assert not _isvc_exists(isvc_api, test_namespace, name)

    other = tmp_path / "other.pub"
    other.write_bytes(keys.generate_key_pair("x").public_pem)
    ref = parse(model.reference)
    with make_client(ref.registry, plain_http=True) as client:
        signing.sign(client, ref, model.digest, keys.load_private_key(key_pair.private_pem, PASSWORD))
    wrong = _deploy(write_dag, "deploy_wrong_key", name, test_namespace, model.reference, repr(str(other)), None)
    log = "".join(capfd.readouterr())
    assert task_states(wrong) == {"deploy": "failed"}
    assert "no valid signature by this key" in log
    assert not _isvc_exists(isvc_api, test_namespace, name)

    with make_client(ref.registry, plain_http=True) as client:
        manifest = json.loads(client.get_manifest(ref.repository, model.digest)[0])
    docs = [x for x in manifest["layers"] if ".docs." in x["mediaType"]] or manifest["layers"][-1:]
    blob = registry.blob_data(docs[0]["digest"])
    original = blob.read_bytes()
    try:
        blob.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # one byte of one layer
        tampered = _deploy(
            write_dag, "deploy_tampered", name, test_namespace, model.reference, "True", signing_connection
        )
        log = "".join(capfd.readouterr())
    finally:
        blob.write_bytes(original)
    assert task_states(tampered) == {"deploy": "failed"}
    assert "tampered with after it was signed" in log
    assert not _isvc_exists(isvc_api, test_namespace, name)
    assert PASSWORD not in log
