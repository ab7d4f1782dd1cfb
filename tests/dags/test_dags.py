"""The DAGs of ``dags/``: they load, parse fast, refuse bad trigger-form values, and run end to end
with ``dag.test()`` on the session's control plane and registry (tiny epochs)."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.paths import ROOT

DAGS = ROOT / "dags"
DAG_FILES = sorted(p for p in DAGS.glob("*.py"))
EXPECTED = {
    "train_package_deploy",
    "scheduled_retraining",
    "ui_triggered_training",
    "tfjob_example",
    "mpijob_example",
    "xgboostjob_example",
    "package_in_training_job",
    "package_after_training",
    "trainjob_example",
}


def test_dagbag_loads_every_dag_without_import_errors():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == EXPECTED
    for dag_id in EXPECTED:
        assert bag.dags[dag_id].doc_md, f"{dag_id} has no docstring for newcomers"
    assert not any("code" in Path(p).parts for p in bag.file_last_changed)  # .airflowignore keeps code/ out


@pytest.fixture(scope="module")
def parse_seconds() -> dict[str, float]:
    """Each DAG file's parse time, measured in one fresh interpreter with the provider already
    imported, as the DAG processor has it (one interpreter for all files: its start, importing
    Airflow, took ~20 s a file on a busy machine)."""
    code = (
        "import json, sys, time, airflow.sdk, airflow_provider_training.operators, runpy\n"
        "out = {}\n"
        "for path in sys.argv[1:]:\n"
        # the best of three: one slow pass on a busy machine is the machine, not the file
        "    best = 9e9\n"
        "    for _ in range(3):\n"
        "        t = time.perf_counter(); runpy.run_path(path); best = min(best, time.perf_counter() - t)\n"
        "    out[path] = best\n"
        "print(json.dumps(out))"
    )
    argv = [sys.executable, "-c", code, *map(str, DAG_FILES)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.name)
def test_each_dag_file_parses_in_under_a_second(path: Path, parse_seconds: dict[str, float]):
    assert parse_seconds[str(path)] < 1.0


@pytest.fixture
def repo_dags(dags_folder: Path) -> Path:
    """The repository's DAG files (and code/) copied into the session's DAGs folder for dag.test()."""
    for path in DAG_FILES:
        shutil.copy(path, dags_folder / path.name)
    if not (dags_folder / "code").exists():
        shutil.copytree(DAGS / "code", dags_folder / "code")
    shutil.copy(DAGS / ".airflowignore", dags_folder / ".airflowignore")
    return dags_folder


def load(repo_dags: Path, dag_id: str) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(repo_dags / f"{dag_id}.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags[dag_id]


@pytest.mark.parametrize(
    "conf, field",
    [
        ({"epochs": 0}, "epochs"),
        ({"learning_rate": 0}, "learning_rate"),
        ({"kind": "JAXJob"}, "kind"),
        ({"workers": 9}, "workers"),
        ({"batch_size": "big"}, "batch_size"),
        ({"repository": "Not/Valid/Repo"}, "repository"),
        ({"tag": "-bad"}, "tag"),
        ({"deploy": "yes"}, "deploy"),
    ],
)
def test_ui_triggered_training_refuses_invalid_params(airflow_db, repo_dags, conf, field):
    from airflow.sdk.exceptions import ParamValidationError

    dag = load(repo_dags, "ui_triggered_training")
    with pytest.raises(ParamValidationError, match=field):
        params = copy.deepcopy(dag.params)
        params.update(conf)
        params.validate()


@pytest.fixture
def registry_default(registry: Any, monkeypatch: pytest.MonkeyPatch, control_plane: Any) -> Any:
    monkeypatch.setenv(
        "AIRFLOW_CONN_MODELKIT_REGISTRY_DEFAULT",
        json.dumps({"conn_type": "modelkit_registry", "host": registry.host, "extra": {"plain_http": True}}),
    )
    monkeypatch.setenv("AIRFLOW_TRAINING_HOME", str(control_plane.home))
    return registry


def states(run: Any) -> dict[str, str]:
    from tests.deploy.conftest import task_states

    return task_states(run)


@pytest.mark.slow
@pytest.mark.parametrize("job_api", ["v1", "v2"])  # PyTorchJob, or the Kubeflow Trainer v2 TrainJob
def test_train_package_deploy_end_to_end(
    airflow_db, repo_dags, registry_default, kube_api, test_namespace, job_api, monkeypatch
):
    from airflow_provider_training.kitops import keys
    from tests.deploy.conftest import delete_and_wait, xcoms

    # the v1 run also signs (the DAG's signing_conn_id param) and so deploys only what that key signed
    signing = {}
    if job_api == "v1":
        pair = keys.generate_key_pair("dag-key-password")
        monkeypatch.setenv(
            "AIRFLOW_CONN_DIGITS_SIGNING",
            json.dumps(
                {
                    "conn_type": "modelkit_signing",
                    "password": "dag-key-password",
                    "extra": {"private_key": pair.private_pem.decode()},
                }
            ),
        )
        signing = {"signing_conn_id": "digits_signing"}
    dag = load(repo_dags, "train_package_deploy")
    started = time.monotonic()
    try:
        run = dag.test(run_conf={"epochs": 3, "namespace": test_namespace, "job_api": job_api, **signing})
        assert states(run) == {
            "train": "success",
            "package": "success",
            "approve": "success",
            "deploy": "success",
            "smoke_test": "success",
        }
        pushed = xcoms("train_package_deploy", run.run_id)
        assert pushed[("package", "digest")].startswith("sha256:")
        if signing:  # signed with provenance, and the deploy step verified that very digest
            assert pushed[("package", "signature")].endswith(".sig")
            assert pushed[("package", "provenance")]
            assert pushed[("deploy", "verified_digest")] == pushed[("package", "digest")]
        else:
            assert ("package", "signature") not in pushed and ("deploy", "verified_digest") not in pushed
        assert pushed[("deploy", "url")].startswith("http://127.0.0.1:")
        assert pushed[("smoke_test", "return_value")]["accuracy"] >= 0.8
        assert pushed[("train", "job_kind")] == {"v1": "PyTorchJob", "v2": "TrainJob"}[job_api]
    finally:
        delete_and_wait(kube_api, test_namespace, "digits")
    assert time.monotonic() - started < 180


@pytest.mark.slow
def test_scheduled_retraining_deploys_only_on_improvement(
    airflow_db, repo_dags, registry_default, kube_api, test_namespace, capfd
):
    from tests.deploy.conftest import delete_and_wait, xcoms

    dag = load(repo_dags, "scheduled_retraining")
    try:
        first = dag.test(run_conf={"epochs": 1, "namespace": test_namespace})
        assert states(first)["deploy"] == "success"  # nothing was deployed: deploy
        capfd.readouterr()
        better = dag.test(run_conf={"epochs": 6, "namespace": test_namespace})
        out = capfd.readouterr().out
        assert states(better)["deploy"] == "success", out
        assert "decision: deploy — candidate accuracy=" in out
        worse = dag.test(run_conf={"epochs": 1, "namespace": test_namespace})
        out = capfd.readouterr().out
        assert states(worse)["deploy"] == "skipped"
        assert "decision: skip — candidate accuracy=" in out
        served = xcoms("scheduled_retraining", better.run_id)[("package", "reference")]
        from airflow_provider_training.operators.deploy import deployed_storage_uri

        assert served in (deployed_storage_uri("digits", test_namespace) or "")
    finally:
        delete_and_wait(kube_api, test_namespace, "digits")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dag_id", "conf", "ran"),
    [
        (
            "ui_triggered_training",
            {"epochs": 1, "workers": 1, "kind": "PyTorchJob", "deploy": False},
            {"choose_kind", "job_spec", "train_pytorchjob", "package"},  # TFJob branch and deploy skipped
        ),
        ("tfjob_example", {}, {"train"}),
        ("mpijob_example", {}, {"train"}),
        ("xgboostjob_example", {}, {"train", "package"}),
        ("package_in_training_job", {}, {"registry_secret", "train_and_package"}),
        ("package_after_training", {}, {"submit", "wait_for_training", "package"}),
        ("trainjob_example", {}, {"train", "package"}),
    ],
)
def test_example_dag_runs_end_to_end(airflow_db, repo_dags, registry_default, test_namespace, dag_id, conf, ran):
    dag = load(repo_dags, dag_id)
    params = {"namespace": test_namespace} if "namespace" in dag.params else {}
    if "epochs" in dag.params and "epochs" not in conf:
        params["epochs"] = 1
    run = dag.test(run_conf={**params, **conf})
    result = states(run)
    failed = {task: state for task, state in result.items() if state not in ("success", "skipped")}
    assert run.state == "success" and not failed, failed
    assert {task for task, state in result.items() if state == "success"} == ran, result


# -- the rehearsal in image mode (tests/fixtures/images.py): the PyTorchJob's replicas from the training
# image, kit from the packaging image, the predictor from its image; no replica uses this machine's Python
TRAINING_LINE = "python /opt/venv/bin/python as uid 1000"


@pytest.mark.slow
@pytest.mark.timeout(2400)  # the first user of built_images waits for the build (minutes when cold)
def test_train_package_deploy_runs_the_built_images(
    airflow_db, repo_dags, registry, built_images, oci_control_plane, monkeypatch
):
    from kubernetes import client, config

    from tests.deploy.conftest import delete_and_wait, xcoms

    monkeypatch.setenv(
        "AIRFLOW_CONN_MODELKIT_REGISTRY_DEFAULT",
        json.dumps({"conn_type": "modelkit_registry", "host": registry.host, "extra": {"plain_http": True}}),
    )
    monkeypatch.setenv("AIRFLOW_TRAINING_HOME", str(oci_control_plane.home))
    # (the daemon runs images already; this tells the tasks, so that packing runs in the packaging image)
    monkeypatch.setenv("AIRFLOW__TRAINING__EMBEDDED_RUNTIME", "oci")
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(oci_control_plane.kubeconfig), client_configuration=configuration)
    api_client = client.ApiClient(configuration)
    core = client.CoreV1Api(api_client)
    namespace = f"rehearsal-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    dag = load(repo_dags, "train_package_deploy")
    try:
        run = dag.test(run_conf={"epochs": 2, "namespace": namespace})
        assert states(run) == {s: "success" for s in ("train", "package", "approve", "deploy", "smoke_test")}
        pushed = xcoms("train_package_deploy", run.run_id)
        assert pushed[("smoke_test", "return_value")]["accuracy"] >= 0.8
        job = pushed[("train", "job_name")]
        digests = {key: entry["digest"] for key, entry in built_images.digests.items()}
        for replica in (f"{job}-master-0", f"{job}-worker-0"):
            log = core.read_namespaced_pod_log(replica, namespace)
            # the image's interpreter (it exists only in the image) as the image's non-root user
            assert TRAINING_LINE in log, log[-2000:]
            status = core.read_namespaced_pod(replica, namespace).status.container_statuses[0]
            assert status.image_id.endswith(digests["training"])
        images_used: dict[str, Any] = {}
        for item in core.list_namespaced_pod(namespace).items:
            for status in (item.status.init_container_statuses or []) + (item.status.container_statuses or []):
                images_used.setdefault(status.image_id.rsplit("@", 1)[-1], []).append(
                    f"{item.metadata.name}/{status.name}"
                )
        # the packaging Job is gone with its pods and their events (the operator deletes it): the
        # node's store shows what its pod pulled — the packaging image, as the image table says
        store = oci_control_plane.home / "node" / "oci" / "blobs" / "sha256"
        assert (store / digests["packaging"].split(":")[1]).exists()
        assert any(name.endswith("/kserve-container") for name in images_used.get(digests["predictor"], [])), (
            images_used
        )
    finally:
        delete_and_wait(api_client, namespace, "digits")
        core.delete_namespace(namespace)
        api_client.close()
