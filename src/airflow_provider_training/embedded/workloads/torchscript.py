"""A TorchScript model server speaking the Open Inference Protocol (KServe v2) and KServe v1.

Run by the embedded InferenceService controller as the predictor process::

    python -m airflow_provider_training.embedded.workloads.torchscript \
        --model-dir /mnt/models --model-name digits --host 127.0.0.1 --port 8080

Endpoints: ``/v2/health/live``, ``/v2/health/ready``, ``/v2/models/<name>``,
``/v2/models/<name>/ready``, ``/v2/models/<name>/infer`` and ``/v1/models/<name>:predict``.
The model is the TorchScript file named by the Kitfile's ``model.path``, else the only ``*.pt`` /
``*.pth`` / ``*.torchscript`` file in the model directory.
"""

from __future__ import annotations

import argparse
import threading
import uuid
from pathlib import Path
from typing import Any

import uvicorn
import yaml
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

SUFFIXES = (".pt", ".pth", ".torchscript")
DATATYPES = {"FP32": "float32", "FP64": "float64", "INT64": "int64", "INT32": "int32"}


class InferInput(BaseModel):
    name: str
    shape: list[int]
    datatype: str
    data: list[Any]
    parameters: dict[str, Any] | None = None


class InferRequest(BaseModel):
    id: str | None = None
    inputs: list[InferInput]
    parameters: dict[str, Any] | None = None


class PredictRequest(BaseModel):
    instances: list[Any]


def find_model(model_dir: Path) -> Path:
    """The model file: Kitfile ``model.path`` first, else the one TorchScript-looking file."""
    for name in ("Kitfile", "kitfile", ".kitfile"):
        kitfile = model_dir / name
        if kitfile.is_file():
            declared = (yaml.safe_load(kitfile.read_text()) or {}).get("model", {}).get("path")
            if declared and (model_dir / declared).is_file():
                return model_dir / str(declared)
    candidates = sorted(p for p in model_dir.rglob("*") if p.suffix in SUFFIXES and p.is_file())
    if len(candidates) != 1:
        found = ", ".join(str(p.relative_to(model_dir)) for p in candidates) or "none"
        raise SystemExit(f"{model_dir}: expected one TorchScript model file ({'/'.join(SUFFIXES)}), found {found}")
    return candidates[0]


def create_app(model_dir: Path, model_name: str) -> FastAPI:
    import torch

    torch.set_num_threads(1)
    path = find_model(model_dir)
    module = torch.jit.load(str(path), map_location="cpu")
    module.eval()
    lock = threading.Lock()
    app = FastAPI(title=f"predictor {model_name}")

    def as_tensor(values: Any, dtype: str, shape: list[int] | None = None) -> Any:
        try:
            tensor = torch.tensor(values, dtype=getattr(torch, dtype))
            return tensor.reshape(shape) if shape is not None else tensor
        except (TypeError, ValueError, RuntimeError) as exc:
            raise HTTPException(400, f"input is not a rectangular {dtype} array: {exc}") from None

    def run(tensor: Any) -> Any:
        try:
            with lock, torch.no_grad():
                return module(tensor)
        except RuntimeError as exc:
            raise HTTPException(400, f"model rejected input of shape {list(tensor.shape)}: {exc}") from None

    def check_name(name: str) -> None:
        if name != model_name:
            raise HTTPException(404, f"model {name!r} not found; this server serves {model_name!r}")

    @app.get("/v2/health/live")
    def live() -> dict[str, bool]:
        return {"live": True}

    @app.get("/v2/health/ready")
    def ready() -> dict[str, bool]:
        return {"ready": True}

    @app.get("/v2/models/{name}")
    def metadata(name: str) -> dict[str, Any]:
        check_name(name)
        return {
            "name": model_name,
            "versions": ["1"],
            "platform": "pytorch_torchscript",
            "inputs": [{"name": "input-0", "datatype": "FP32", "shape": [-1, -1]}],
            "outputs": [{"name": "output-0", "datatype": "FP32", "shape": [-1, -1]}],
        }

    @app.get("/v2/models/{name}/ready")
    def model_ready(name: str) -> dict[str, Any]:
        check_name(name)
        return {"name": model_name, "ready": True}

    @app.post("/v2/models/{name}/infer")
    def infer(name: str, request: InferRequest) -> dict[str, Any]:
        check_name(name)
        if len(request.inputs) != 1:
            raise HTTPException(400, f"expected exactly one input tensor, got {len(request.inputs)}")
        item = request.inputs[0]
        dtype = DATATYPES.get(item.datatype)
        if dtype is None:
            raise HTTPException(400, f"unsupported datatype {item.datatype!r}; use one of {', '.join(DATATYPES)}")
        expected = 1
        for dim in item.shape:
            expected *= dim
        if expected != len(item.data):
            raise HTTPException(400, f"shape {item.shape} needs {expected} values, got {len(item.data)}")
        output = run(as_tensor(item.data, dtype, item.shape))
        return {
            "model_name": model_name,
            "model_version": "1",
            "id": request.id or str(uuid.uuid4()),
            "outputs": [
                {
                    "name": "output-0",
                    "shape": list(output.shape),
                    "datatype": "FP32",
                    "data": output.flatten().tolist(),
                }
            ],
        }

    @app.post("/v1/models/{name}:predict")
    def predict(name: str, request: PredictRequest) -> dict[str, Any]:
        check_name(name)
        output = run(as_tensor(request.instances, "float32"))
        return {"predictions": output.tolist()}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve a TorchScript model over the Open Inference Protocol.")
    parser.add_argument("--model-dir", default="/mnt/models", type=Path)
    parser.add_argument("--model-name", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    app = create_app(args.model_dir, args.model_name)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
