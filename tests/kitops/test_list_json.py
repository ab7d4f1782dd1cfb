"""``kit list --format json`` in kit 1.17's shape, and the table as kit prints it."""

from __future__ import annotations

import json
import os

from airflow_provider_training.cli.main import main as cli
from airflow_provider_training.kitops import pack as packmod
from airflow_provider_training.kitops.listing import format_bytes
from airflow_provider_training.kitops.reference import parse
from tests.kitops.conftest import make_tree


def _kits(tmp_path, store):
    named = make_tree(
        tmp_path / "named",
        {
            "Kitfile": "manifestVersion: 1.0.0\npackage:\n  name: mnist\n  authors: [Ada <ada@example.com>, Bo]\n"
            "model:\n  name: net\n  path: model\n",
            "model/w.bin": b"w" * 3000,
        },
    )
    bare = make_tree(tmp_path / "bare", {"Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: m\n", "m/x": b"x"})
    for ctx in (named, bare):
        for path in ctx.rglob("*"):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
    a = packmod.pack(named, reference=parse("localhost/ml/mnist:v2,v1"), store=store)
    b = packmod.pack(bare, store=store)  # untagged: kit lists it as <none>
    c = packmod.pack(bare, reference=parse("registry.example.com/team/bare:latest"), store=store)
    return a, b, c


def test_list_json_is_kits_shape(tmp_path, store, monkeypatch, capsys):
    a, b, _ = _kits(tmp_path, store)
    monkeypatch.setenv("KITOPS_HOME", str(store.home))
    assert cli(["kit", "list", "--format", "json"]) == 0
    out = capsys.readouterr().out
    layers_a = sum(layer.size for layer in a.layers)
    layers_b = sum(layer.size for layer in b.layers)
    rows = sorted(
        [
            (
                "ml/mnist",
                a.digest,
                '[\n      "v1",\n      "v2"\n    ]',
                "mnist",
                layers_a,
                "Ada \\u003cada@example.com\\u003e",
            ),
            ("\\u003cnone\\u003e", b.digest, "null", "\\u003cnone\\u003e", layers_b, "\\u003cnone\\u003e"),
            (
                "registry.example.com/team/bare",
                b.digest,
                '[\n      "latest"\n    ]',
                "\\u003cnone\\u003e",
                layers_b,
                "\\u003cnone\\u003e",
            ),
        ],
        key=lambda r: (r[0].replace("\\u003c", "<").replace("\\u003e", ">"), r[1]),
    )
    expected = (
        "[\n"
        + ",\n".join(
            "  {\n"
            f'    "repo": "{repo}",\n'
            f'    "digest": "{digest}",\n'
            f'    "tags": {tags},\n'
            f'    "modelName": "{name}",\n'
            f'    "size": {size},\n'
            f'    "author": "{author}"\n'
            "  }"
            for repo, digest, tags, name, size, author in rows
        )
        + "\n]\n"
    )
    assert out == expected
    parsed = json.loads(out)
    assert [list(row) for row in parsed] == [["repo", "digest", "tags", "modelName", "size", "author"]] * 3
    assert all(isinstance(row["size"], int) for row in parsed)  # bytes, not "2.9 KiB"


def test_list_table_is_kits_columns(tmp_path, store, monkeypatch, capsys):
    a, _, _ = _kits(tmp_path, store)
    monkeypatch.setenv("KITOPS_HOME", str(store.home))
    assert cli(["kit", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["REPOSITORY", "TAG", "MAINTAINER", "NAME", "SIZE", "DIGEST"]
    mnist = [line for line in lines if line.startswith("ml/mnist ")]
    assert [line.split()[1] for line in mnist] == ["v1", "v2"]  # one line per tag
    assert format_bytes(sum(layer.size for layer in a.layers)) in mnist[0]
    assert mnist[0].endswith(a.digest)
    starts = {line.index("sha256:") for line in lines[1:]}
    assert len(starts) == 1 and lines[0].index("DIGEST") in starts  # aligned columns


def test_empty_store_lists_an_empty_array(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KITOPS_HOME", str(tmp_path / "empty"))
    assert cli(["kit", "list", "--format", "json"]) == 0
    assert capsys.readouterr().out == "[]\n"


def test_format_bytes_is_kits():
    assert [format_bytes(n) for n in (0, 1023, 1024, 1048575, 5 << 30)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1023.9 KiB",  # rounded down, as kit does, never "1024.0 KiB"
        "5.0 GiB",
    ]
