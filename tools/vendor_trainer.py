"""Copy Kubeflow Trainer v2.3.0 / JobSet v0.12.0 data from shared/crds/trainer-v2.3.0 into the package.

Run from the repository root: ``python tools/vendor_trainer.py DIR`` where DIR holds kubeflow/trainer v2.3.0's
``trainer.kubeflow.org_*.yaml`` CRDs, JobSet v0.12.0's ``jobset.x-k8s.io_jobsets.yaml`` and, under
``runtimes/``, the ``manifests/base/runtimes/*.yaml`` of the same trainer tag. The CRDs become compact gzipped JSON beside the v1 ones (``specs/crds/<plural>.json.gz``); the
default ClusterTrainingRuntimes are copied byte for byte to ``specs/trainer/runtimes/``. Origins
are recorded in ``specs/crds/SOURCES.md``.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

import yaml

PACKAGE = Path(__file__).resolve().parent.parent / "src/airflow_provider_training/specs"


def main(source: str) -> None:
    root = Path(source)
    for path in sorted([*root.glob("trainer.kubeflow.org_*.yaml"), *root.glob("jobset.x-k8s.io_*.yaml")]):
        crd = yaml.safe_load(path.read_text())
        plural = crd["spec"]["names"]["plural"]
        data = json.dumps(crd, separators=(",", ":"), sort_keys=False).encode()
        # mtime=0 keeps the vendored bytes reproducible.
        with gzip.GzipFile(PACKAGE / "crds" / f"{plural}.json.gz", "wb", mtime=0) as out:
            out.write(data)
        print(f"{path.name} -> crds/{plural}.json.gz")
    for path in sorted((root / "runtimes").glob("*.yaml")):
        shutil.copyfile(path, PACKAGE / "trainer" / "runtimes" / path.name)
        print(f"runtimes/{path.name} -> trainer/runtimes/{path.name}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/vendor_trainer.py DIR")
    main(sys.argv[1])
