"""TrainingJobOperator in real Airflow runs (``dag.test()``) against the embedded control plane.

Jobs with a ``script`` are real: the embedded job controller and node agent run their replicas as
processes. Jobs without one are driven (``autopilot`` writes their status), where a test needs a
job that never ends or kinds whose runtimes (mpirun, …) this box lacks.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow_provider_training.specs.kinds import KINDS
from tests.operators.helpers import dag_file, job_literal, succeed, xcom

EPOCHS = "import time\nfor e in (1, 2):\n    print(f'epoch {e} loss {0.5 / e}', flush=True); time.sleep(0.3)"


def test_sync_success_pushes_identity_streams_logs_and_returns_a_summary(
    run_dag: Any, test_namespace: str, job_driver: Any, capfd: Any
) -> None:
    dr = run_dag(
        dag_file(
            "sync_ok",
            f"""
PyTorchJobOperator(task_id="train", job={job_literal(replicas={"Master": 1, "Worker": 1}, script=EPOCHS)},
                   namespace="{test_namespace}", labels={{"team": "vision"}})
""",
        ),
        "sync_ok",
    )
    ti = dr.get_task_instance("train")
    assert ti.state == "success"
    submitted = job_driver.custom.get_namespaced_custom_object(
        "kubeflow.org", "v1", test_namespace, "pytorchjobs", "mnist"
    )
    meta = submitted["metadata"]
    assert meta["labels"]["team"] == "vision" and meta["labels"]["airflow-training/task-id"] == "train"
    assert meta["labels"]["airflow-training/try-number"] == "1"
    pod = job_driver.core.read_namespaced_pod("mnist-worker-0", test_namespace)
    assert pod.metadata.labels["airflow-training/dag-id"] == "sync_ok"  # the pods carry the identity too
    assert (xcom(ti, "job_name"), xcom(ti, "job_namespace"), xcom(ti, "job_kind"), xcom(ti, "job_uid")) == (
        "mnist",
        test_namespace,
        "PyTorchJob",
        meta["uid"],
    )
    result = xcom(ti, "return_value")
    assert result["state"] == "Succeeded" and result["uid"] == meta["uid"] and result["completed"]
    assert result["replica_statuses"]["Master"]["succeeded"] == 1
    out = "".join(capfd.readouterr())
    assert "[mnist-master-0] epoch 1 loss 0.5" in out and "[mnist-master-0] epoch 2 loss 0.25" in out
    assert "[mnist-worker-0]" not in out  # log_replicas="master" by default
    # the extra link opens the cockpit's "Training job" tab of this task instance
    assert xcom(ti, "_link_TrainingJobLink").endswith(
        f"/runs/{quote(ti.run_id, safe=':+')}/tasks/{ti.task_id}/plugin/training-job"
    )
    assert xcom(ti, "job_conn_id") == ""  # the embedded control plane


CRASH = (
    "import sys\nfor i in range(60): print('step', i)\n"
    "print('Traceback (most recent call last):'); print('ValueError: loss is NaN'); sys.exit(3)"
)


def test_failure_reports_reason_exit_code_and_log_tail_and_deletes_per_policy(
    run_dag: Any, test_namespace: str, job_driver: Any, capfd: Any
) -> None:
    dr = run_dag(
        dag_file(
            "sync_fail",
            f"""
PyTorchJobOperator(task_id="train", job={job_literal(script=CRASH)}, namespace="{test_namespace}",
                   on_finish_action="delete", log_tail_lines=5)
""",
        ),
        "sync_fail",
    )
    assert dr.get_task_instance("train").state == "failed"
    out = "".join(capfd.readouterr())
    assert "PyTorchJobFailed: PyTorchJob mnist is failed because 1 Master replica(s) failed." in out
    assert "Failed replicas: mnist-master-0 (exit code 3, Error)" in out
    tail = out.split("Last 5 log lines of mnist-master-0:")[1]
    assert "  ValueError: loss is NaN" in tail and "  step 57" in tail and "  step 56" not in tail
    listed = job_driver.custom.list_namespaced_custom_object("kubeflow.org", "v1", test_namespace, "pytorchjobs")
    assert listed["items"] == []  # on_finish_action="delete"


def test_templated_spec_from_params_and_run_conf(run_dag: Any, autopilot: Any, test_namespace: str) -> None:
    pilot = autopilot("PyTorchJob", test_namespace, "airflow-training/dag-id=templated", succeed())
    job = """{
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "mnist-{{ ds_nodash }}"},
        "spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}, "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "python:3.11",
                 "command": ["python", "train.py", "--epochs", "{{ params.epochs }}"]}]}}},
            "Worker": {"replicas": "{{ params.workers }}", "restartPolicy": "Never", "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "python:3.11", "command": ["python", "train.py"]}]}}}}}}"""
    dr = run_dag(
        dag_file(
            "templated",
            f'''
PyTorchJobOperator(task_id="train", job={job}, namespace="{test_namespace}", timeout=60)
''',
            params='{"epochs": Param(10, type="integer"), "workers": Param(1, type="integer")}',
        ),
        "templated",
        run_conf={"epochs": 3, "workers": 2},
    )
    assert dr.get_task_instance("train").state == "success"
    [submitted] = pilot.seen
    assert submitted["metadata"]["name"] == f"mnist-{dr.logical_date.strftime('%Y%m%d')}"
    specs = submitted["spec"]["pytorchReplicaSpecs"]
    assert specs["Worker"]["replicas"] == 2  # "2" from the template, submitted as an integer
    assert specs["Master"]["template"]["spec"]["containers"][0]["command"][-1] == "3"


def test_invalid_job_fails_before_submitting_with_the_field_path(
    run_dag: Any, autopilot: Any, test_namespace: str, capfd: Any
) -> None:
    pilot = autopilot("PyTorchJob", test_namespace, "airflow-training/dag-id=invalid", succeed())
    dr = run_dag(
        dag_file(
            "invalid",
            f'''
PyTorchJobOperator(task_id="train", namespace="{test_namespace}", job="""
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: bad}}
spec:
  pytorchReplicaSpecs:
    Master: {{replicas: two, template: {{spec: {{containers: [{{name: pytorch, image: python:3.11}}]}}}}}}
""")
''',
        ),
        "invalid",
    )
    assert dr.get_task_instance("train").state == "failed"
    assert "spec.pytorchReplicaSpecs[Master].replicas" in "".join(capfd.readouterr())
    assert pilot.seen == []


def test_retry_keeps_the_finished_job_and_submits_under_a_new_name(
    run_dag: Any, test_namespace: str, job_driver: Any
) -> None:
    script = "import sys; sys.exit(0 if {{ ti.try_number }} > 1 else 3)"  # the first try's job fails
    dr = run_dag(
        dag_file(
            "retry",
            f"""
PyTorchJobOperator(task_id="train", job={job_literal(script=script)}, namespace="{test_namespace}", retries=1,
                   retry_delay=timedelta(seconds=0))
""",
        ),
        "retry",
    )
    ti = dr.get_task_instance("train")
    assert ti.state == "success" and ti.try_number == 2
    jobs = job_driver.custom.list_namespaced_custom_object("kubeflow.org", "v1", test_namespace, "pytorchjobs")["items"]
    states = {j["metadata"]["name"]: j["status"]["conditions"][-1]["type"] for j in jobs}
    assert states == {"mnist": "Failed", "mnist-r2": "Succeeded"}  # the failed one is kept as history
    assert xcom(ti, "job_name") == "mnist-r2"


def test_job_level_timeout_deletes_the_running_job(
    run_dag: Any, test_namespace: str, job_driver: Any, capfd: Any
) -> None:
    dr = run_dag(
        dag_file(
            "timeout",
            f"""
PyTorchJobOperator(task_id="train", job={job_literal(script="import time; time.sleep(120)")},
                   namespace="{test_namespace}", timeout=2)
""",
        ),
        "timeout",
    )
    assert dr.get_task_instance("train").state == "failed"
    assert "did not finish within 2s" in "".join(capfd.readouterr())
    listed = job_driver.custom.list_namespaced_custom_object("kubeflow.org", "v1", test_namespace, "pytorchjobs")
    assert listed["items"] == []


def test_a_timed_out_job_names_the_replica_that_could_not_start_and_why(
    run_dag: Any, test_namespace: str, capfd: Any
) -> None:
    from tests.factories import simple_job

    job = simple_job("PyTorchJob", "stuck", script="print('never')")
    main = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    main["env"] = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "no-such-secret", "key": "token"}}}]
    dr = run_dag(
        dag_file("stuck", f'PyTorchJobOperator(task_id="train", job={job!r}, namespace="{test_namespace}", timeout=4)'),
        "stuck",
    )
    assert dr.get_task_instance("train").state == "failed"
    out = "".join(capfd.readouterr())
    assert "did not finish within 4s; replicas not running: stuck-master-0" in out
    assert 'CreateContainerConfigError: secret "no-such-secret" not found' in out


REPLICAS = {
    "PyTorchJob": {"Master": 1},
    "TFJob": {"Worker": 1},
    "MPIJob": {"Launcher": 1, "Worker": 1},
    "XGBoostJob": {"Master": 1},
    "PaddleJob": {"Master": 1},
    "MXJob": {"Scheduler": 1, "Server": 1, "Worker": 1},
    "JAXJob": {"Worker": 1},
}


def test_the_typed_operator_of_every_kind(run_dag: Any, autopilot: Any, test_namespace: str) -> None:
    pilots = {kind: autopilot(kind, test_namespace, "airflow-training/dag-id=every_kind", succeed()) for kind in KINDS}
    body = "\n".join(
        f'{kind}Operator(task_id="{kind.lower()}", job={job_literal(kind, kind.lower(), REPLICAS[kind])}, '
        f'namespace="{test_namespace}")'
        for kind in KINDS
    )
    dr = run_dag(dag_file("every_kind", body), "every_kind")
    for kind in KINDS:
        ti = dr.get_task_instance(kind.lower())
        assert ti.state == "success", kind
        assert xcom(ti, "job_kind") == kind
        assert [j["metadata"]["name"] for j in pilots[kind].seen] == [kind.lower()]
