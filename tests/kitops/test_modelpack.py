"""kit 1.16 parity against the real registry: ModelPack, raw layers, pack --push, diff, list."""

from __future__ import annotations

import filecmp
import json
import os
from pathlib import Path

import pytest
import yaml

from airflow_provider_training.cli.main import main as cli
from airflow_provider_training.kitops import diff as diffmod
from airflow_provider_training.kitops import mediatypes, packpush, transfer
from airflow_provider_training.kitops import pack as packmod
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.modelpack import kitfile_for_manifest, read_kitfile
from airflow_provider_training.kitops.reference import parse
from airflow_provider_training.kitops.unpack import unpack
from tests.kitops.conftest import make_tree
from tests.paths import KITOPS_TESTDATA

FILES = ("model/weights.bin", "model/config.json", "src/train.py", "data/train.csv")


def test_modelpack_roundtrip_identical_bytes(registry, client_for, store, model_dir, tmp_path):
    ref = parse(f"{registry.host}/ml-models/modelpack:v1")
    packed = packmod.pack(model_dir, reference=ref, store=store, modelpack=True)
    manifest = json.loads(packed.manifest)
    assert manifest["artifactType"] == mediatypes.MODELPACK_ARTIFACT_TYPE
    assert manifest["config"]["mediaType"] == mediatypes.MODELPACK_CONFIG
    assert [x["mediaType"] for x in manifest["layers"]] == [
        "application/vnd.cncf.model.weight.v1.tar",
        "application/vnd.cncf.model.code.v1.tar",
        "application/vnd.cncf.model.dataset.v1.tar",
    ]
    config = json.loads(store.read_blob(manifest["config"]["digest"]))
    assert config["modelfs"] == {"type": "layers", "diffIds": [x["digest"] for x in manifest["layers"]]}
    assert config["descriptor"]["name"] == "mnist"
    kitfile = json.loads(manifest["annotations"][mediatypes.ANNOTATION_KITFILE])
    assert kitfile["model"]["digest"] == manifest["layers"][0]["digest"]

    client = client_for(registry)
    assert transfer.push(store, ref, client).digest == packed.digest
    other = LocalStore(tmp_path / "other")
    pulled = transfer.pull(other, ref, client)
    assert pulled.digest == packed.digest
    out = unpack(other, ref, tmp_path / "out")
    for rel in FILES:
        assert filecmp.cmp(model_dir / rel, out.directory / rel, shallow=False), rel
    assert "name: mnist" in (out.directory / "Kitfile").read_text()
    assert transfer.inspect_remote(client, ref)["kitfile"]["model"]["name"] == "mnist"


def test_modelkit_and_modelpack_share_layer_blobs(store, model_dir):
    kit = packmod.pack(model_dir, reference=parse("localhost/kit:v1"), store=store)
    mp = packmod.pack(model_dir, reference=parse("localhost/mp:v1"), store=store, modelpack=True)
    assert [x.digest for x in kit.layers] == [x.digest for x in mp.layers]
    assert kit.digest != mp.digest and kit.config_digest != mp.config_digest
    # gzip too: the compressed bytes do not depend on the format
    kz = packmod.pack(model_dir, reference=parse("localhost/kz:v1"), store=store, compression="gzip")
    mz = packmod.pack(model_dir, reference=parse("localhost/mz:v1"), store=store, compression="gzip", modelpack=True)
    assert [x.digest for x in kz.layers] == [x.digest for x in mz.layers]
    assert mz.layers[0].media_type == "application/vnd.cncf.model.weight.v1.tar+gzip"
    # packing twice gives the same manifest (no createdAt in the ModelPack config)
    again = packmod.pack(model_dir, reference=parse("localhost/mp:v2"), store=store, modelpack=True)
    assert again.digest == mp.digest


@pytest.mark.parametrize(
    ("artifact_type", "config_type", "expected"),
    [
        (mediatypes.MODELPACK_ARTIFACT_TYPE, mediatypes.MODELPACK_CONFIG, "modelpack"),
        (None, mediatypes.MODELPACK_CONFIG, "modelpack"),  # no artifactType: the config decides, as kit
        (None, mediatypes.CONFIG, "kitops"),  # a kit <= 1.9 ModelKit
        (mediatypes.ARTIFACT_TYPE, mediatypes.CONFIG, "kitops"),
        (None, "application/vnd.oci.image.config.v1+json", None),
    ],
)
def test_format_is_detected_like_kit(artifact_type, config_type, expected):
    manifest = {"schemaVersion": 2, "config": {"mediaType": config_type, "digest": "sha256:0", "size": 2}}
    if artifact_type:
        manifest["artifactType"] = artifact_type
    assert mediatypes.manifest_format(manifest) == expected


def test_modelpack_refuses_mcp_servers(store, tmp_path):
    ctx = make_tree(
        tmp_path / "mcp",
        {
            "Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: m\nmcpServers:\n  - name: tools\n    path: tools.mcpb\n",
            "m/w": "x",
            "tools.mcpb": "PK",
        },
    )
    with pytest.raises(ValueError, match="mcpServers cannot be packed as a ModelPack"):
        packmod.pack(ctx, store=store, modelpack=True)


def test_modelpack_from_another_tool_unpacks_by_filepath_annotations():
    case = yaml.safe_load(
        (
            KITOPS_TESTDATA / "kitops-upstream-2026/kitfile-generation/test-kitfile-for-manifest-and-config.yaml"
        ).read_text()
    )
    manifest = json.loads(case["manifestJson"])
    kf = kitfile_for_manifest(manifest, case["configJson"].encode())
    assert json.loads(kf.to_config_json()) == {"package": {}, **json.loads(case["kitfileJson"])}
    assert read_kitfile(manifest, case["configJson"].encode()).model.path == "test-file.safetensors"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"config": {"mediaType": "application/vnd.oci.image.config.v1+json"}, "artifactType": None}, "not a ModelKit"),
        (
            {"layers": [{"mediaType": "application/vnd.cncf.model.weight.v1.raw+gzip", "digest": "sha256:1"}]},
            "raw and compressed",
        ),
        (
            {"layers": [{"mediaType": "application/vnd.kitops.modelkit.model.v1.tar", "digest": "sha256:1"}]},
            "not a modelpack one",
        ),
        (
            {"layers": [{"mediaType": "application/vnd.cncf.model.weight.v1.tar", "digest": "sha256:1"}]},
            "no org.cncf.model.filepath",
        ),
        (
            {"layers": [{"mediaType": "application/vnd.cncf.model.weight.v1.tar+lz4", "digest": "sha256:1"}]},
            "unknown compression",
        ),
    ],
)
def test_manifest_validation_follows_kits_rules(change, message):
    manifest = {
        "schemaVersion": 2,
        "artifactType": mediatypes.MODELPACK_ARTIFACT_TYPE,
        "config": {"mediaType": mediatypes.MODELPACK_CONFIG, "digest": "sha256:0", "size": 2},
        "layers": [],
    }
    manifest.update({k: v for k, v in change.items() if v is not None})
    if change.get("artifactType", 1) is None:
        manifest.pop("artifactType")
    with pytest.raises(mediatypes.MediaTypeError, match=message):
        mediatypes.validate_manifest(manifest)


def test_raw_layers_roundtrip_and_rules(registry, client_for, store, tmp_path):
    ctx = make_tree(
        tmp_path / "raw",
        {
            "Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: model.safetensors\n"
            "  parts:\n    - path: config.json\ndocs:\n  - path: README.md\n",
            "model.safetensors": os.urandom(300_000),
            "config.json": "{}",
            "README.md": "# hi\n",
        },
    )
    os.chmod(ctx / "model.safetensors", 0o600)
    ref = parse(f"{registry.host}/ml-models/raw:v1")
    packed = packmod.pack(ctx, reference=ref, store=store, modelpack=True, layer_format="raw")
    weight = packed.layers[0]
    assert weight.media_type == "application/vnd.cncf.model.weight.v1.raw"
    assert weight.size == 300_000 and weight.digest == weight.diff_id
    assert store.read_blob(weight.digest) == (ctx / "model.safetensors").read_bytes()  # stored verbatim
    meta = json.loads(json.loads(packed.manifest)["layers"][0]["annotations"][mediatypes.ANNOTATION_FILE_METADATA])
    assert meta == {
        "name": "model.safetensors",
        "mode": 0o600,
        "uid": 0,
        "gid": 0,
        "size": 300_000,
        "mtime": "1970-01-01T00:00:00Z",
        "typeflag": 48,
    }
    client = client_for(registry)
    transfer.push(store, ref, client)
    other = LocalStore(tmp_path / "other")
    transfer.pull(other, ref, client)
    out = unpack(other, ref, tmp_path / "out").directory
    for rel in ("model.safetensors", "config.json", "README.md"):
        assert filecmp.cmp(ctx / rel, out / rel, shallow=False)
    assert (out / "model.safetensors").stat().st_mode & 0o777 == 0o600
    kit_raw = packmod.pack(ctx, reference=parse("localhost/raw:kit"), store=store, layer_format="raw")
    assert kit_raw.layers[2].media_type == "application/vnd.kitops.modelkit.docs.v1.raw"

    with pytest.raises(ValueError, match="cannot be compressed"):
        packmod.pack(ctx, store=store, layer_format="raw", compression="gzip")
    make_tree(ctx, {"Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: .\n"})
    with pytest.raises(ValueError, match="a raw layer is one regular file"):
        packmod.pack(ctx, store=store, layer_format="raw")


def _tree_state(root: Path) -> list[tuple[str, int]]:
    if not root.exists():
        return []
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*"))


@pytest.mark.parametrize("modelpack", [False, True], ids=["modelkit", "modelpack"])
def test_pack_push_streams_and_leaves_the_local_store_untouched(
    modelpack, registry, client_for, store, model_dir, tmp_path
):
    packmod.pack(model_dir, reference=parse("localhost/other:v1"), store=store)  # a store with content
    before = _tree_state(store.home)
    ref = parse(f"{registry.host}/ml-models/stream-{int(modelpack)}:v1,latest")
    client = client_for(registry)
    pushed = packpush.pack_and_push(model_dir, ref, client, store=store, modelpack=modelpack)
    assert _tree_state(store.home) == before
    assert pushed.transferred > 0
    # the same bytes as pack-then-push
    local = packmod.pack(
        model_dir, reference=parse("localhost/cmp:v1"), store=LocalStore(tmp_path / "s2"), modelpack=modelpack
    )
    assert pushed.digest == local.digest
    for tag in ("v1", "latest"):
        assert client.get_manifest(ref.repository, tag)[1] == pushed.digest
    fresh = LocalStore(tmp_path / "fresh")
    transfer.pull(fresh, ref, client)
    out = unpack(fresh, ref, tmp_path / "out").directory
    for rel in FILES:
        assert filecmp.cmp(model_dir / rel, out / rel, shallow=False), rel


def test_pack_push_failure_mid_layer_is_reported_and_leaves_no_tag(registry, client_for, tmp_path):
    ctx = make_tree(
        tmp_path / "big",
        {"Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: m\n", "m/w": os.urandom(3 << 20)},
    )
    seen = {"n": 0}

    def progress(n: int) -> None:  # runs in the producing thread, mid-stream
        seen["n"] += n
        if seen["n"] > 1 << 20:
            raise OSError(5, "Input/output error", str(ctx / "m/w"))

    with pytest.raises(OSError, match="Input/output error"):
        packpush.pack_and_push(ctx, parse(f"{registry.host}/ml-models/bad:v1"), client_for(registry), progress=progress)
    with pytest.raises(Exception, match=r"404|unknown|not"):
        client_for(registry).get_manifest("ml-models/bad", "v1")


def test_diff_of_two_runs_local_and_remote(registry, client_for, store, model_dir, tmp_path, monkeypatch, capsys):
    client = client_for(registry)
    first = parse(f"{registry.host}/ml-models/diff:run1")
    packmod.pack(model_dir, reference=first, store=store)
    transfer.push(store, first, client)
    (model_dir / "model/weights.bin").write_bytes(b"retrained" * 1000)
    (model_dir / "model/metrics.json").write_text('{"accuracy": 0.98}')
    second = parse(f"{registry.host}/ml-models/diff:run2")
    packmod.pack(model_dir, reference=second, store=store)

    result = diffmod.diff(transfer.remote_side(client, first), transfer.local_side(store, second))
    assert not result.identical and not result.same_config
    by_path = {x.path: x for x in result.layers}
    assert by_path["src"].change == "shared" and by_path["data/train.csv"].change == "shared"
    model = by_path["model"]
    assert model.change == "modified"
    assert [(f.path, f.change) for f in model.files] == [
        ("model/metrics.json", "added"),
        ("model/weights.bin", "modified"),
    ]

    monkeypatch.setenv("KITOPS_HOME", str(store.home))
    assert cli(["kit", "diff", f"remote://{first}", f"local://{second}", "--plain-http", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {x["path"]: x["change"] for x in data["layers"]}["model"] == "modified"
    assert cli(["kit", "diff", str(second), str(second)]) == 0
    assert capsys.readouterr().out.strip() == "ModelKits are identical"
    assert cli(["kit", "diff", str(first), str(second), "--plain-http"]) == 0  # first: local miss -> remote
    text = capsys.readouterr().out
    assert "Changed layers" in text and "modified  model/weights.bin" in text


def test_cli_pack_use_model_pack_push_and_list_json(registry, store, model_dir, monkeypatch, capsys):
    monkeypatch.setenv("KITOPS_HOME", str(store.home))
    ref = f"{registry.host}/ml-models/cli-mp:v1"
    assert cli(["kit", "pack", str(model_dir), "-t", ref, "--use-model-pack", "--push", "--plain-http"]) == 0
    assert capsys.readouterr().out.startswith("Pushed sha256:")
    assert not store.root.exists()  # nothing stored locally
    assert cli(["kit", "pack", str(model_dir), "-t", "localhost/cli-mp:v1", "--use-model-pack"]) == 0
    capsys.readouterr()
    assert cli(["kit", "list", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    # as kit prints it: the default registry localhost/ dropped, modelName = package.name
    assert [(r["repo"], r["tags"], r["modelName"]) for r in rows] == [("cli-mp", ["v1"], "mnist")]
