"""Loading from every source users have, and clear errors for bad input."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest
import yaml

from airflow_provider_training.specs import (
    KINDS,
    JobSpecError,
    PyTorchJob,
    TFJob,
    defaulted_from_dict,
    load_job,
    load_jobs,
    with_defaults,
)
from airflow_provider_training.specs.jobs import job_from_dict
from tests.factories import minimal

AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]}]
        }
    }
}


def _with_uninterpreted_fields() -> dict:
    doc = minimal("PyTorchJob")
    pod = doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    pod["affinity"] = AFFINITY
    pod["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    pod["securityContext"] = {"runAsUser": 1000, "fsGroup": 2000}
    pod["containers"][0]["livenessProbe"] = {"exec": {"command": ["true"]}, "periodSeconds": 5}
    doc["metadata"]["labels"] = {"team": "ml"}
    doc["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 60, "schedulingPolicy": {"queue": "q1"}}
    return doc


def test_round_trip_keeps_fields_the_project_does_not_interpret() -> None:
    doc = _with_uninterpreted_fields()
    job = load_job(doc)
    assert isinstance(job, PyTorchJob)
    assert job.to_dict() == doc


def test_every_source_form_gives_the_same_job(tmp_path: Path) -> None:
    doc = _with_uninterpreted_fields()
    text = yaml.safe_dump(doc)
    path = tmp_path / "job.yaml"
    path.write_text(text)
    from_model = load_job(load_job(doc))
    for source in (doc, text, path, str(path), from_model):
        assert load_job(source).to_dict() == doc


def test_multi_document_file(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump_all([minimal("PyTorchJob", "a"), None, minimal("TFJob", "b")]))
    jobs = load_jobs(path)
    assert [(type(j), j.name) for j in jobs] == [(PyTorchJob, "a"), (TFJob, "b")]


def test_malformed_yaml_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nspec:\n  a: [1, 2\n  b: 3\n")
    with pytest.raises(JobSpecError) as exc:
        load_jobs(path)
    message = str(exc.value)
    assert str(path) in message
    assert "line 5, column 4" in message


def test_second_document_is_named(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump_all([minimal("PyTorchJob"), {"apiVersion": "v2", "kind": "Nope"}]))
    with pytest.raises(JobSpecError) as exc:
        load_jobs(path)
    assert f"{path}#2" in str(exc.value)
    assert 'kind: Unsupported value: "Nope"' in str(exc.value)


def test_type_errors_are_collected_with_paths() -> None:
    doc = minimal("PyTorchJob")
    doc["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "three"
    doc["spec"]["runPolicy"] = {"backoffLimit": True}
    with pytest.raises(JobSpecError) as exc:
        load_job(doc)
    paths = [i.path for i in exc.value.issues]
    assert paths == ["spec.pytorchReplicaSpecs[Worker].replicas", "spec.runPolicy.backoffLimit"]


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(JobSpecError, match="file not found"):
        load_job(tmp_path / "nope.yaml")


def test_timestamps_stay_strings() -> None:
    job = load_job("apiVersion: kubeflow.org/v1\nkind: JAXJob\nmetadata:\n  name: j\n  creationTimestamp: 2024-01-01T00:00:00Z\n"
                   "spec:\n  jaxReplicaSpecs: {}\n")  # fmt: skip
    assert job.metadata.creation_timestamp == "2024-01-01T00:00:00Z"


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 12):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    bomb = "\n".join(lines) + "\nkind: PyTorchJob\n"
    start = time.perf_counter()
    with pytest.raises(JobSpecError, match="through YAML aliases"):
        load_jobs(bomb)
    assert time.perf_counter() - start < 2


def test_python_tags_are_not_executed() -> None:
    with pytest.raises(JobSpecError, match="malformed YAML"):
        load_jobs("!!python/object/apply:os.system ['true']\n")


def test_defaults_as_the_operator_applies_them_without_touching_the_user_spec() -> None:
    doc = minimal("PyTorchJob")
    doc["spec"]["pytorchReplicaSpecs"]["Worker"].pop("replicas")
    doc["spec"]["pytorchReplicaSpecs"]["Worker"].pop("restartPolicy")
    doc["spec"]["elasticPolicy"] = {"maxReplicas": 4}
    job = load_job(doc)
    defaulted = with_defaults(job)
    worker = defaulted.replica_specs["Worker"]
    assert worker.replicas == 1
    assert worker.restart_policy == "OnFailure"
    [port] = worker.template.spec.containers[0].ports
    assert (port.name, port.container_port) == ("pytorchjob-port", 23456)
    assert defaulted.run_policy.clean_pod_policy == "None"
    assert defaulted.spec.elastic_policy.min_replicas == 4
    assert defaulted.spec.nproc_per_node == "auto"
    assert job.to_dict() == doc  # the user's job is unchanged


def test_defaults_rename_replica_types_case_insensitively() -> None:
    doc = minimal("TFJob")
    specs = doc["spec"]["tfReplicaSpecs"]
    specs["ps"] = specs.pop("Chief")
    defaulted = with_defaults(load_job(doc))
    assert set(defaulted.replica_specs) == {"PS", "Worker"}
    assert defaulted.spec.success_policy == ""


def test_mpi_defaults() -> None:
    doc = minimal("MPIJob")
    doc["spec"]["mpiReplicaSpecs"]["Worker"].pop("replicas")
    doc["spec"]["cleanPodPolicy"] = "Running"
    defaulted = with_defaults(load_job(doc))
    assert defaulted.replica_specs["Worker"].replicas == 0
    assert defaulted.replica_specs["Launcher"].template.spec.containers[0].ports is None
    assert defaulted.run_policy.clean_pod_policy == "Running"
    assert defaulted.spec.clean_pod_policy == "Running"
    assert defaulted.spec.slots_per_worker == 1


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_defaulting_a_document_in_place_gives_what_defaulting_a_copy_gives(kind: str) -> None:
    """The controller's ``defaulted_from_dict`` (no copy) against ``with_defaults`` (a copy)."""
    doc = minimal(kind)
    for spec in doc["spec"][KINDS[kind].replica_specs_field].values():
        spec.pop("replicas", None)
        spec.pop("restartPolicy", None)
    if kind == "MPIJob":
        doc["spec"]["cleanPodPolicy"] = "Running"  # read before runPolicy is defaulted
    expected = with_defaults(job_from_dict(doc)).to_dict()
    assert defaulted_from_dict(copy.deepcopy(doc)).to_dict() == expected


# YAML that a document without aliases can hold besides strings, string keys and lists: what the
# loader builds itself must equal what PyYAML's constructor builds, errors included.
SHAPES = [
    "a: 1\nb: 0x1f\nc: 1_000\nd: -.inf\ne: .nan\nf: 1e3\ng: ~\nh: yes\ni: 2024-01-01\nj: '1'\nk: !!str 5\n",
    "base: {x: 1, y: 2}\nmerged: {<<: {x: 1, y: 2}, z: 3}\nlist: [1, [2, [3]], {}]\n",
    "? [a, b]\n: c\n",  # a list as a key: unhashable, refused
    "1: int key\ntrue: bool key\n~: null key\n",
    "a: !!binary aGVsbG8=\nb: !!set {x, y}\nc: !!omap [a: 1, b: 2]\nd: !!float 3\n",
    "a: !!int nope\n",
    "a: !!map [1, 2]\n",
    "dup: 1\ndup: 2\nother: 3\n",
    "a: !!str {b: 1}\n",
    "- top\n- level\n",
    "plain: text\n",
]


@pytest.mark.parametrize("text", SHAPES)
def test_documents_without_aliases_load_as_pyyaml_loads_them(text: str) -> None:
    from airflow_provider_training.specs import loader

    try:
        expected = [doc for doc in yaml.load_all(text, Loader=loader._Loader) if doc is not None]
    except (yaml.YAMLError, TypeError, ValueError) as exc:
        with pytest.raises(JobSpecError) as raised:
            loader.read_documents(text)
        assert f"malformed YAML: {exc}" in str(raised.value)
        return
    if not all(isinstance(doc, dict) for doc in expected):
        with pytest.raises(JobSpecError, match="expected a mapping"):
            loader.read_documents(text)
        return
    loaded = [doc.data for doc in loader.read_documents(text)]
    assert repr(loaded) == repr(expected)  # repr: nan != nan, and 1 == 1.0 == True
