"""ModelKit operators in a real DAG run (dag.test()) against the real registry."""

from __future__ import annotations

import json

import pytest

from airflow_provider_training.kitops import transfer
from airflow_provider_training.kitops.api import make_client
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.reference import parse
from airflow_provider_training.kitops.source import embedded_claim_dir
from airflow_provider_training.kitops.unpack import unpack
from airflow_provider_training.links.modelkit import registry_url
from tests.kitops.conftest import make_tree


def _xcoms(dag_id: str, run_id: str) -> dict[tuple[str, str], object]:
    from airflow.models.xcom import XComModel
    from airflow.settings import Session

    with Session() as session:
        rows = session.query(XComModel).filter(XComModel.dag_id == dag_id, XComModel.run_id == run_id).all()
        return {(r.task_id, r.key): _decode(r.value) for r in rows}


def _decode(value: object) -> object:
    if isinstance(value, (bytes, str)):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _asset_events(uri: str) -> list[dict[str, object]]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.settings import Session

    with Session() as session:
        asset = session.query(AssetModel).filter(AssetModel.uri == uri).one_or_none()
        if asset is None:
            return []
        return [e.extra for e in session.query(AssetEvent).filter(AssetEvent.asset_id == asset.id).all()]


def test_pack_and_push_operator_in_a_dag(write_dag, registry_basic, monkeypatch, tmp_path):
    monkeypatch.setenv(
        "AIRFLOW_CONN_TCR_TEST",
        json.dumps(
            {
                "conn_type": "modelkit_registry",
                "host": registry_basic.host,
                "login": registry_basic.username,
                "password": registry_basic.password,
                "extra": {"plain_http": True},
            }
        ),
    )
    claim = embedded_claim_dir("mnist-output")
    make_tree(
        claim,
        {
            "run1/model/weights.bin": b"\x01" * 4096,
            "run1/src/train.py": "x=1\n",
            "run1/README.md": "# mnist\n",
        },
    )
    dag = write_dag(
        f"""
        from airflow.sdk import DAG
        from airflow_provider_training.operators.modelkit import (
            ModelKitPackAndPushOperator, ModelKitPackOperator)

        with DAG("modelkit_e2e", schedule=None):
            ModelKitPackAndPushOperator(
                task_id="pack_push",
                source="pvc://mnist-output/run1",
                reference="{registry_basic.host}/ml-models/mnist-model:{{{{ ds_nodash }}}}",
                registry_conn_id="tcr_test",
            )
            ModelKitPackOperator(task_id="bad_kitfile", source="{tmp_path}", reference="localhost/x:v1",
                                 kitfile="model:\\n  pth: x\\n")
    """,
        "modelkit_e2e",
    )
    dr = dag.test()
    states = {ti.task_id: ti.state for ti in dr.get_task_instances()}
    assert states["pack_push"] == "success"
    assert states["bad_kitfile"] == "failed"
    x = _xcoms("modelkit_e2e", dr.run_id)
    ref_text = x[("pack_push", "reference")]
    assert ref_text.startswith(f"{registry_basic.host}/ml-models/mnist-model:") and ref_text[-8:].isdigit()
    digest = x[("pack_push", "digest")]
    assert x[("pack_push", "size")] > 4096
    ret = x[("pack_push", "return_value")]
    assert ret["digest"] == digest and {layer["path"] for layer in ret["layers"]} >= {
        "model/weights.bin",
        "src",
    }
    # the push is real: a fresh store pulls it and gets the same bytes back
    ref = parse(ref_text)
    store = LocalStore(tmp_path / "verify")
    with (
        make_client(registry_basic.host, plain_http=True, credential=None) as anon,
        pytest.raises(Exception, match="username and password"),
    ):
        transfer.pull(store, ref, anon)
    from airflow_provider_training.kitops.credentials import Credential

    with make_client(
        registry_basic.host,
        plain_http=True,
        credential=Credential(registry_basic.username, registry_basic.password),
    ) as client:
        assert transfer.pull(store, ref, client).digest == digest
    out = unpack(store, ref, tmp_path / "out")
    assert (out.directory / "model/weights.bin").read_bytes() == b"\x01" * 4096
    events = _asset_events(f"modelkit://{registry_basic.host}/ml-models/mnist-model")
    assert events and events[-1]["digest"] == digest and events[-1]["tag"] == ref.tag


def test_pack_then_push_with_kit_engine_stand_in(write_dag, registry, monkeypatch, tmp_path):
    import sys

    from tests.kitops.test_engine_and_cli import ROOT

    exe = tmp_path / "kit"
    exe.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path[:0] = {[str(ROOT / 'src'), str(ROOT)]!r}\n"
        f"from tests.kitops.fake_kit import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    exe.chmod(0o755)
    monkeypatch.setenv("FAKE_KIT_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv(
        "AIRFLOW_CONN_LOCAL_REG",
        json.dumps({"conn_type": "modelkit_registry", "host": registry.host, "extra": {"plain_http": True}}),
    )
    src = make_tree(tmp_path / "out", {"model.safetensors": b"w" * 100, "README.md": "r"})
    dag = write_dag(
        f"""
        from airflow.sdk import DAG
        from airflow_provider_training.operators.modelkit import ModelKitPackOperator, ModelKitPushOperator

        with DAG("modelkit_kit_engine", schedule=None):
            ref = "{registry.host}/ml-models/generated:v1"
            p = ModelKitPackOperator(task_id="pack", source="{src}", reference=ref, engine="kit",
                                     kit_binary="{exe}")
            q = ModelKitPushOperator(task_id="push", reference=ref, registry_conn_id="local_reg",
                                     engine="kit", kit_binary="{exe}")
            p >> q
    """,
        "modelkit_kit_engine",
    )
    dr = dag.test()
    assert {ti.task_id: ti.state for ti in dr.get_task_instances()} == {"pack": "success", "push": "success"}
    calls = [json.loads(line)["argv"] for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [c[0] for c in calls] == ["pack", "push"]
    x = _xcoms("modelkit_kit_engine", dr.run_id)
    with make_client(registry.host, plain_http=True) as client:
        remote = transfer.inspect_remote(client, parse(f"{registry.host}/ml-models/generated:v1"))
    assert remote["digest"] == x[("push", "digest")] == x[("pack", "digest")]
    assert remote["kitfile"]["model"]["path"] == "model.safetensors"  # generated Kitfile


def test_cluster_mode_is_a_clear_error(tmp_path):
    from airflow_provider_training.kitops.source import ClusterModeUnavailableError, resolve_source

    with pytest.raises(ClusterModeUnavailableError, match="package it with a Job on the cluster"):
        resolve_source("pvc://out/run1", cluster=True)
    assert resolve_source("pvc://out/run1").parts[-4:] == ("pvc", "default", "out", "run1")
    with pytest.raises(ValueError, match="leaves the claim"):
        resolve_source("pvc://out/../../etc")


def test_registry_links():
    assert registry_url("ccr.ccs.tencentyun.com/ml-models/mnist:v1") == (
        "https://console.cloud.tencent.com/tcr/repository/details/ccr/ml-models/mnist"
    )
    assert registry_url("inst.tencentcloudcr.com/ml/mnist:v1").startswith("https://console.cloud.tencent.com/tcr/")
    assert registry_url("127.0.0.1:5000/ml/m:v1") == "http://127.0.0.1:5000/v2/ml/m/manifests/v1"


def test_hook_test_connection(registry_token, monkeypatch):
    from airflow_provider_training.hooks.registry import ModelKitRegistryHook

    conn = {
        "conn_type": "modelkit_registry",
        "host": registry_token.host,
        "login": registry_token.username,
        "password": registry_token.password,
        "extra": {"plain_http": True},
    }
    monkeypatch.setenv("AIRFLOW_CONN_REG_OK", json.dumps(conn))
    monkeypatch.setenv("AIRFLOW_CONN_REG_BAD", json.dumps({**conn, "password": "nope"}))
    ok, msg = ModelKitRegistryHook("reg_ok").test_connection()
    assert ok, msg
    ok, msg = ModelKitRegistryHook("reg_bad").test_connection()
    assert not ok and "authentication" in msg and "nope" not in msg


@pytest.mark.parametrize(
    ("signing", "expected"),
    [
        (None, "signing_conn_id 'no_such_key': no Airflow connection has this id"),
        ({"conn_type": "modelkit_signing", "extra": {}}, "has no private_key or private_key_file extra"),
        ({"conn_type": "modelkit_signing", "extra": {"private_key": "not a PEM key"}}, "signing key:"),
    ],
    ids=["missing", "no-key", "garbage-key"],
)
def test_a_bad_signing_connection_fails_before_anything_is_pushed(
    write_dag, registry, monkeypatch, tmp_path, capfd, signing, expected
):
    """A signing connection that is missing or holds no usable key fails the task at once, naming
    the connection, and leaves no (unsigned) tag in the registry."""
    import httpx

    monkeypatch.setenv(
        "AIRFLOW_CONN_PREFLIGHT_REGISTRY",
        json.dumps({"conn_type": "modelkit_registry", "host": registry.host, "extra": {"plain_http": True}}),
    )
    if signing is not None:
        monkeypatch.setenv("AIRFLOW_CONN_NO_SUCH_KEY", json.dumps(signing))
    make_tree(tmp_path / "model", {"weights.bin": b"\x02" * 64})
    repository = f"ml-models/preflight-{tmp_path.name.lower().replace('_', '-')}"
    dag = write_dag(
        f"""
        from airflow.sdk import DAG
        from airflow_provider_training.operators.modelkit import ModelKitPackAndPushOperator

        with DAG("modelkit_preflight", schedule=None):
            ModelKitPackAndPushOperator(task_id="package", source="{tmp_path / "model"}",
                                        reference="{registry.host}/{repository}:v1",
                                        registry_conn_id="preflight_registry", signing_conn_id="no_such_key")
    """,
        "modelkit_preflight",
    )
    dr = dag.test()
    [ti] = dr.get_task_instances()
    assert ti.state == "failed"
    out = "".join(capfd.readouterr())
    assert expected in out and "Nothing was pushed" in out
    tags = httpx.get(f"http://{registry.host}/v2/{repository}/tags/list", timeout=10)
    assert tags.status_code == 404 or not tags.json().get("tags"), tags.text  # no tag, signed or not
