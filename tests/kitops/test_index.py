"""ModelKit indexes as kit 1.17 writes and reads them: the bytes, ``kit index`` against the real
registry, ``pull``/``unpack -l`` selection, and hostile indexes."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from airflow_provider_training.cli.main import main as cli
from airflow_provider_training.kitops import index as ix
from airflow_provider_training.kitops import mediatypes
from airflow_provider_training.kitops.indexstore import IndexStore
from airflow_provider_training.kitops.localstore import LocalStore
from airflow_provider_training.kitops.reference import parse
from tests.kitops.conftest import make_tree
from tests.paths import KITOPS_TESTDATA

GOLDEN = KITOPS_TESTDATA / "kit-1.17"
DIGEST_A = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
DIGEST_B = "sha256:da799e0122c7ed9ee7a934ef25c5e5b7a9bf896252e7215d9dfa9c8894b86bfc"


def test_index_bytes_are_kits():
    empty = (GOLDEN / "index-empty.json").read_bytes()
    assert ix.ModelKitIndex().to_bytes() == empty  # "manifests":[] never null, as kit marshals it

    index = ix.ModelKitIndex()
    labels, _ = ix.parse_label_edits(
        [
            "quantization=q4_0",
            'gpuArchs:=["sm_80", "sm_90"]',
            "totalParameters:=7000000000",
            'vramRequirement:={"bytes": 6442450944}',
        ]
    )
    annotations, _ = ix.parse_annotation_edits(["org.example.tested=true"])
    manifest_a = {"artifactType": mediatypes.ARTIFACT_TYPE, "layers": [{"size": 4000}, {"size": 96}]}
    index.add(ix.new_entry(DIGEST_A, 649, manifest_a, "q4_0", labels, annotations))
    manifest_b = {"artifactType": mediatypes.MODELPACK_ARTIFACT_TYPE, "layers": [{"size": 2048}]}
    index.add(ix.new_entry(DIGEST_B, 649, manifest_b, "", {"quantization": '"q8_0"'}, {}))
    golden = (GOLDEN / "index-two-variants.json").read_bytes()
    assert index.to_bytes() == golden
    # reading and writing again is digest-stable: label values stay as written (7000000000, not 7e+09)
    assert ix.parse(golden, "golden").to_bytes() == golden


def test_raw_label_values_survive_a_rewrite():
    doc = json.loads((GOLDEN / "index-two-variants.json").read_text())
    doc["manifests"][0]["modelMetadata"] = {"ratio": 1.50, "name": "x"}
    text = json.dumps(doc).replace("1.5,", "1.50 ,").replace('"x"', '"\\u00e9\\u003c"')
    parsed = ix.parse(text.encode(), "hand-written")
    out = parsed.to_bytes().decode()
    assert '"modelMetadata":{"name":"\\u00e9\\u003c","ratio":1.50}' in out  # Go compacts a RawMessage


# -- against the real registry -----------------------------------------------------------------


@pytest.fixture
def kit_home(tmp_path, monkeypatch):
    def use(name: str) -> LocalStore:
        home = tmp_path / name
        monkeypatch.setenv("KITOPS_HOME", str(home))
        return LocalStore(home)

    return use


def _run(*args: str) -> int:
    return cli(["kit", *args])


def _variants(tmp_path: Path, host: str) -> dict[str, str]:
    """Three variants of one model in one repository: tar, zstd, ModelPack."""
    digests = {}
    for tag, extra in (("q4_0", []), ("q8_0", ["--compression", "zstd"]), ("mp", ["--use-model-pack"])):
        ctx = make_tree(
            tmp_path / f"src-{tag}",
            {
                "Kitfile": f"manifestVersion: 1.0.0\npackage:\n  name: idx\nmodel:\n  path: {tag}.bin\n",
                f"{tag}.bin": tag,
            },
        )
        os.chmod(ctx / f"{tag}.bin", 0o644)
        assert _run("pack", str(ctx), "-t", f"{host}/ml/model:{tag}", *extra) == 0
        digests[tag] = LocalStore().resolve(parse(f"{host}/ml/model:{tag}")).digest
        assert _run("push", f"{host}/ml/model:{tag}", "--plain-http") == 0
    return digests


def test_index_roundtrip_through_the_registry(registry, kit_home, tmp_path, capsys):
    host = registry.host
    store = kit_home("writer")
    digests = _variants(tmp_path, host)
    index = f"{host}/ml/model:all"
    assert _run("index", "create", index) == 0
    assert _run("index", "add", index, f"{host}/ml/model:q4_0", "-l", "quantization=q4_0", "-l", "gpu=cuda") == 0
    assert _run("index", "add", index, f"{host}/ml/model:q8_0", "-l", "quantization=q8_0", "-l", "gpu=metal") == 0
    assert _run("index", "add", index, f"{host}/ml/model:mp", "-l", "quantization=q8_0", "-l", "gpu=cuda") == 0
    _, written = IndexStore(store).resolve(parse(index))
    sizes = {tag: store.resolve(parse(f"{host}/ml/model:{tag}")).size for tag in digests}
    layer_bytes = {
        tag: sum(x["size"] for x in store.read_manifest(store.resolve(parse(f"{host}/ml/model:{tag}")))["layers"])
        for tag in digests
    }

    def entry(tag: str, gpu: str, quantization: str, artifact: str) -> str:
        return (
            f'{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{digests[tag]}","size":{sizes[tag]},'
            f'"annotations":{{"ml.kitops.modelkit.original-tag":"{tag}","ml.kitops.modelkit.size":"{layer_bytes[tag]}"}},'
            f'"artifactType":"{artifact}","modelMetadata":{{"gpu":"{gpu}","quantization":"{quantization}"}}}}'
        )

    expected = (
        '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json",'
        '"artifactType":"application/vnd.kitops.modelkit.index.v1+json","manifests":['
        + entry("q4_0", "cuda", "q4_0", mediatypes.ARTIFACT_TYPE)
        + ","
        + entry("q8_0", "metal", "q8_0", mediatypes.ARTIFACT_TYPE)
        + ","
        + entry("mp", "cuda", "q8_0", mediatypes.MODELPACK_ARTIFACT_TYPE)
        + "]}"
    ).encode()
    assert written == expected
    capsys.readouterr()
    assert _run("list", "--format", "json") == 0  # kit list shows ModelKits only, never the index
    assert sorted(t for row in json.loads(capsys.readouterr().out) for t in row["tags"]) == ["mp", "q4_0", "q8_0"]
    assert _run("index", "push", index, "--plain-http") == 0
    assert capsys.readouterr().out.strip() == "Pushed index sha256:" + hashlib.sha256(expected).hexdigest()

    # another machine: the index comes back byte for byte, and -l picks the ModelKit
    reader = kit_home("reader")
    assert _run("index", "pull", index, "--plain-http") == 0
    assert IndexStore(reader).resolve(parse(index))[1] == expected
    out = tmp_path / "metal"
    assert _run("unpack", index, "-l", "gpu=metal", "-d", str(out), "--plain-http") == 0
    assert (out / "q8_0.bin").read_text() == "q8_0"  # the zstd variant
    out = tmp_path / "mp"
    assert _run("unpack", index, "-l", "quantization=q8_0", "-l", "gpu=cuda", "-d", str(out), "--plain-http") == 0
    assert (out / "mp.bin").read_text() == "mp"  # the ModelPack variant

    # a third machine without the index: unpack and pull -l read it from the registry
    kit_home("remote-only")
    out = tmp_path / "q4"
    assert _run("unpack", index, "-l", "quantization=q4_0", "-d", str(out), "--plain-http") == 0
    assert (out / "q4_0.bin").read_text() == "q4_0"
    capsys.readouterr()
    assert _run("pull", index, "-l", "gpu=metal", "--plain-http") == 0
    assert digests["q8_0"] in capsys.readouterr().out


def test_selection_errors_are_kits(registry, kit_home, tmp_path, capsys):
    host = registry.host
    kit_home("errors")
    _variants(tmp_path, host)
    index = f"{host}/ml/model:sel"
    assert _run("index", "create", index) == 0
    for tag in ("q4_0", "q8_0"):
        assert _run("index", "add", index, f"{host}/ml/model:{tag}", "-l", f"quantization={tag}", "-l", "gpu=cuda") == 0
    assert _run("index", "push", index, "--plain-http") == 0
    capsys.readouterr()

    def error(*args: str) -> str:
        assert _run(*args) == 1
        return capsys.readouterr().err

    kit_home("fresh")
    d = str(tmp_path / "x")
    assert "2 ModelKits in the index match" in error("unpack", index, "-l", "gpu=cuda", "-d", d, "--plain-http")
    text = error("unpack", index, "-l", "quantization=q2_k", "-d", d, "--plain-http")
    assert "no ModelKit in the index has quantization=q2_k" in text
    assert f"  {host}/ml/model:q4_0  (gpu=cuda, quantization=q4_0)" in text
    assert "select the ModelKit to unpack with --label" in error("unpack", index, "-d", d, "--plain-http")
    assert "find ModelKit index" in error("unpack", f"{host}/ml/model:q4_0", "-l", "a=b", "-d", d, "--plain-http")
    assert "kit index inspect" in error("inspect", index, "-r", "--plain-http")
    assert "expected key=value" in error("pull", index, "-l", "bad", "--plain-http")
    assert not Path(d).exists() or not any(Path(d).iterdir())


def test_index_push_before_its_modelkits_is_refused_clearly(registry, kit_home, tmp_path, capsys):
    host = registry.host
    kit_home("early")
    ctx = make_tree(tmp_path / "s", {"Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: w\n", "w": "w"})
    assert _run("pack", str(ctx), "-t", f"{host}/ml/early:v1") == 0
    assert _run("index", "create", f"{host}/ml/early:all") == 0
    assert _run("index", "add", f"{host}/ml/early:all", f"{host}/ml/early:v1") == 0
    capsys.readouterr()
    assert _run("index", "push", f"{host}/ml/early:all", "--plain-http") == 1
    err = capsys.readouterr().err
    assert "does not contain every ModelKit the index references" in err and "ml/early:v1" in err


def test_index_from_kit_is_read_and_relabelled_faithfully(registry, kit_home, tmp_path, client_for, capsys):
    """An index as kit writes it (JSON label values, recorded annotations) pushed to the registry:
    pulled unchanged, selectable, and rewritten by ``index add`` with its raw values intact."""
    host = registry.host
    store = kit_home("kit-written")
    digests = _variants(tmp_path, host)
    golden = json.loads((GOLDEN / "index-two-variants.json").read_text())
    for item, tag in zip(golden["manifests"], ("q4_0", "mp"), strict=True):
        item["digest"] = digests[tag]
        item["size"] = store.resolve(parse(f"{host}/ml/model:{tag}")).size
    text = json.dumps(golden, separators=(",", ":")).encode()
    client = client_for(registry)
    client.put_manifest("ml/model", "kit", text, mediatypes.INDEX)

    kit_home("reads-kit")
    assert _run("index", "pull", f"{host}/ml/model:kit", "--plain-http") == 0
    reader = LocalStore()
    assert IndexStore(reader).resolve(parse(f"{host}/ml/model:kit"))[1] == text
    out = tmp_path / "big"
    assert (
        _run("unpack", f"{host}/ml/model:kit", "-l", "totalParameters=7000000000", "-d", str(out), "--plain-http") == 0
    )
    assert (out / "q4_0.bin").read_text() == "q4_0"
    assert _run("pull", f"{host}/ml/model:q8_0", "--plain-http") == 0
    assert _run("index", "add", f"{host}/ml/model:kit", f"{host}/ml/model:q8_0", "-l", "quantization=q2") == 0
    rewritten = IndexStore(reader).resolve(parse(f"{host}/ml/model:kit"))[1]
    assert rewritten.startswith(text[:-2])  # the kit-written entries, byte for byte, then the new one
    assert b'"totalParameters":7000000000' in rewritten


# -- hostile indexes ---------------------------------------------------------------------------


def test_nested_indexes_are_refused_not_followed(registry, kit_home, tmp_path, client_for, capsys):
    """Index A lists index B, which lists A's tag target again through C: selection stops at the
    first nested level with a clear error instead of following (content addressing makes a literal
    digest cycle impossible; a chain through indexes is what a hostile registry can serve)."""
    host = registry.host
    store = kit_home("nested")  # nothing new may land in the store
    digests = _variants(tmp_path, host)
    client = client_for(registry)

    def push(tag: str, entries: list[dict]) -> tuple[str, int]:
        body = ix.ModelKitIndex([ix.Entry(**e) for e in entries]).to_bytes()
        client.put_manifest("ml/model", tag, body, mediatypes.INDEX)
        return "sha256:" + hashlib.sha256(body).hexdigest(), len(body)

    leaf = store.resolve(parse(f"{host}/ml/model:q4_0"))
    c_digest, c_size = push("c", [{"digest": leaf.digest, "size": leaf.size, "labels": {"k": '"v"'}}])
    b_digest, b_size = push(
        "b", [{"digest": c_digest, "size": c_size, "media_type": mediatypes.INDEX, "labels": {"k": '"v"'}}]
    )
    # A's entry claims to be a ModelKit manifest but is index B
    push("a", [{"digest": b_digest, "size": b_size, "labels": {"k": '"v"'}}])
    capsys.readouterr()
    assert _run("unpack", f"{host}/ml/model:b", "-l", "k=v", "-d", str(tmp_path / "o"), "--plain-http") == 1
    assert "is itself an index" in capsys.readouterr().err
    assert _run("pull", f"{host}/ml/model:a", "-l", "k=v", "--plain-http") == 1
    err = capsys.readouterr().err
    assert "is itself a ModelKit index" in err and b_digest in err and "not followed" in err
    assert [k.descriptor.digest for k in LocalStore().list()] == [digests[t] for t in ("q4_0", "q8_0", "mp")]


def test_index_with_ten_thousand_entries(kit_home, tmp_path, capsys):
    store = kit_home("big")
    ctx = make_tree(tmp_path / "s", {"Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: w\n", "w": "real"})
    assert _run("pack", str(ctx), "-t", "ml/big:real") == 0
    real = store.resolve(parse("ml/big:real"))
    index = ix.ModelKitIndex()
    for n in range(10_000):
        digest = real.digest if n == 9_876 else "sha256:" + hashlib.sha256(str(n).encode()).hexdigest()
        index.entries.append(ix.Entry(digest, 600, labels={"variant": f'"v{n}"', "family": '"llm"'}))
    data = index.to_bytes()
    assert len(data) < ix.MAX_INDEX_BYTES
    IndexStore(store).put(parse("ml/big:all"), data)

    capsys.readouterr()
    assert _run("inspect", "ml/big:all") == 1  # only an index has that name locally
    assert "kit index inspect" in capsys.readouterr().err
    out = tmp_path / "o"
    assert _run("unpack", "ml/big:all", "-l", "variant=v9876", "-d", str(out)) == 0
    assert (out / "w").read_text() == "real"
    capsys.readouterr()
    assert _run("unpack", "ml/big:all", "-l", "variant=nope", "-d", str(out)) == 1
    err = capsys.readouterr().err
    assert "… and 9980 more" in err and len(err.splitlines()) < 30  # bounded, not 10,000 lines
    assert _run("unpack", "ml/big:all", "-l", "family=llm", "-d", str(out)) == 1
    assert "10000 ModelKits in the index match" in capsys.readouterr().err


def test_oversized_or_malformed_index_is_refused(kit_home, tmp_path, capsys):
    store = kit_home("bad")
    huge = ix.ModelKitIndex([ix.Entry("sha256:" + "a" * 64, 1, labels={"pad": '"' + "x" * 1000 + '"'})] * 5000)
    with pytest.raises(ix.ModelKitIndexError, match="more than the 4194304"):
        ix.parse(huge.to_bytes(), "index huge")
    IndexStore(store).put(
        parse("ml/bad:all"),
        b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json",'
        b'"artifactType":"application/vnd.kitops.modelkit.index.v1+json","manifests":[{"digest":"x","size":1}]}',
    )
    assert _run("unpack", "ml/bad:all", "-l", "a=b", "-d", str(tmp_path / "o")) == 1
    assert "entry 0 of index ml/bad:all has digest 'x'" in capsys.readouterr().err.replace("localhost/", "")
    with pytest.raises(ix.NotAnIndexError):
        ix.parse(b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}', "plain")


def test_label_and_annotation_arguments_follow_kit():
    with pytest.raises(ix.ModelKitIndexError, match="expected key=value to set, or key- to remove"):
        ix.parse_label_edits(["bad"])
    with pytest.raises(ix.ModelKitIndexError, match="invalid label key"):
        ix.parse_label_edits(["-bad=1"])
    with pytest.raises(ix.ModelKitIndexError, match="not valid JSON"):
        ix.parse_label_edits(["k:={oops"])
    with pytest.raises(ix.ModelKitIndexError, match="only once"):
        ix.parse_label_edits(["k=1", "k=2"])
    with pytest.raises(ix.ModelKitIndexError, match="reserved"):
        ix.parse_annotation_edits(["ml.kitops.modelkit.size=1"])
    with pytest.raises(ix.ModelKitIndexError, match="invalid label key"):
        ix.parse_label_edits(["a" * 5000 + "!=1"])  # long hostile keys are refused without backtracking
    assert ix.parse_label_edits(["example.com/gpu=a100"])[0] == {"example.com/gpu": '"a100"'}
