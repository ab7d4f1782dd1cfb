"""The built-in TorchScript predictor, as a real process answering Open Inference Protocol requests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def trained_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("model")
    subprocess.run(
        [sys.executable, str(ROOT / "dags/code/train.py"), "--epochs", "15", "--output", str(out)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=300,
    )
    return out


@pytest.fixture(scope="module")
def predictor(trained_model: Path) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow_provider_training.embedded.workloads.torchscript",
         "--model-dir", str(trained_model), "--model-name", "digits", "--port", str(port)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v2/health/ready", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
        if proc.poll() is not None:
            pytest.fail(f"predictor exited: {proc.stderr.read().decode() if proc.stderr else ''}")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_model_metadata_and_readiness(predictor: str) -> None:
    assert httpx.get(f"{predictor}/v2/models/digits/ready").json() == {"name": "digits", "ready": True}
    meta = httpx.get(f"{predictor}/v2/models/digits").json()
    assert meta["platform"] == "pytorch_torchscript"
    assert httpx.get(f"{predictor}/v2/models/other").status_code == 404


def test_infer_predicts_the_digits_it_was_trained_on(predictor: str, trained_model: Path) -> None:
    from sklearn.datasets import load_digits

    digits = load_digits()
    rows = digits.data[:40]
    body = {"inputs": [{"name": "input-0", "shape": [40, 64], "datatype": "FP32", "data": rows.flatten().tolist()}]}
    response = httpx.post(f"{predictor}/v2/models/digits/infer", json=body)
    assert response.status_code == 200, response.text
    [output] = response.json()["outputs"]
    assert output["shape"] == [40, 10]
    logits = [output["data"][i * 10 : (i + 1) * 10] for i in range(40)]
    predicted = [max(range(10), key=row.__getitem__) for row in logits]
    accuracy = sum(p == t for p, t in zip(predicted, digits.target[:40], strict=True)) / 40
    assert accuracy >= 0.8, accuracy
    assert json.loads((trained_model / "metrics.json").read_text())["accuracy"] >= 0.8


def test_bad_requests_get_clear_errors(predictor: str) -> None:
    body = {"inputs": [{"name": "input-0", "shape": [1, 64], "datatype": "FP32", "data": [0.0] * 10}]}
    response = httpx.post(f"{predictor}/v2/models/digits/infer", json=body)
    assert response.status_code == 400
    assert "needs 64 values, got 10" in response.json()["detail"]
    body = {"inputs": [{"name": "input-0", "shape": [1, 5], "datatype": "FP32", "data": [0.0] * 5}]}
    response = httpx.post(f"{predictor}/v2/models/digits/infer", json=body)
    assert response.status_code == 400 and "model rejected input of shape [1, 5]" in response.json()["detail"]


def test_kserve_v1_predict(predictor: str) -> None:
    response = httpx.post(f"{predictor}/v1/models/digits:predict", json={"instances": [[0.0] * 64]})
    assert response.status_code == 200
    assert len(response.json()["predictions"][0]) == 10
