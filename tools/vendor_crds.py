"""Copy the upstream CRDs (``kubeflow.org_*.yaml``) into the package as compact gzipped JSON.

Run from the repository root: ``python tools/vendor_crds.py DIR`` where DIR holds the CRD YAML of the
Training Operator release (``manifests/base/crds/`` of kubeflow/trainer v1.9.4; MXJob from v1.8.1). The package reads
them for schema validation and the embedded API server serves them read-only.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import yaml


def main(source: str) -> None:
    target = Path(__file__).resolve().parent.parent / "src/airflow_provider_training/specs/crds"
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(Path(source).glob("kubeflow.org_*.yaml")):
        crd = yaml.safe_load(path.read_text())
        plural = crd["spec"]["names"]["plural"]
        data = json.dumps(crd, separators=(",", ":"), sort_keys=False).encode()
        # mtime=0 keeps the vendored bytes reproducible.
        with gzip.GzipFile(target / f"{plural}.json.gz", "wb", mtime=0) as out:
            out.write(data)
        print(f"{path.name} -> {plural}.json.gz")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/vendor_crds.py DIR  (DIR: the kubeflow.org_*.yaml CRDs of the release)")
    main(sys.argv[1])
