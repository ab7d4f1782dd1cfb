"""Cluster-mode packaging for the ModelKit operators: write the registry Secret, run the packaging
``batch/v1`` Job (``kitops.packagejob``), follow its log into the task log, wait for ``Complete`` /
``Failed`` and read the pushed digest and manifest from the pod's log.

The same code path serves a real cluster and the embedded control plane (which runs batch Jobs as
local processes); only the ``kubernetes`` connection differs.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from airflow.sdk.exceptions import AirflowException

from airflow_provider_training.client.errors import ApiError, JobDeleted, WaitTimeout
from airflow_provider_training.client.logs import LogFollower
from airflow_provider_training.client.state import job_state
from airflow_provider_training.client.sync import TrainingJobClient
from airflow_provider_training.kitops import packagejob
from airflow_provider_training.kitops.packagejob import PackageJob, PackageLogError, PackageOutput
from airflow_provider_training.specs.actions import OnFinishAction

FINISH_ACTIONS = tuple(OnFinishAction)  # str-valued: the strings users write are members
KIND = "Job"


def job_name(task_id: str, run_id: str, try_number: int) -> str:
    """``modelkit-<task>-<hash>``: a DNS label, unique per task try."""
    slug = re.sub(r"[^a-z0-9-]+", "-", task_id.lower()).strip("-")[:40] or "task"
    suffix = hashlib.sha256(f"{run_id}/{task_id}/{try_number}".encode()).hexdigest()[:8]
    return f"modelkit-{slug}-{suffix}"


@dataclass
class Redactor:
    """Masks secrets in text that reaches the task log or an error message (defence in depth: the
    Job never prints them)."""

    secrets: tuple[str, ...] = ()

    def __call__(self, text: str) -> str:
        for s in self.secrets:
            if s:
                text = text.replace(s, "***")
        return text


class PackagingJobRunner:
    def __init__(
        self,
        client: TrainingJobClient,
        job: PackageJob,
        *,
        secret_data: dict[str, str] | None,
        log: Any,
        timeout: float,
        on_finish_action: str,
        log_tail_lines: int,
    ) -> None:
        self.client, self.job, self.log = client, job, log
        self.secret_data = secret_data
        self.timeout, self.on_finish_action, self.log_tail_lines = timeout, on_finish_action, log_tail_lines
        self.redact = Redactor(tuple(v for k, v in (secret_data or {}).items() if k == packagejob.PASSWORD_KEY))
        self.uid: str | None = None

    # -- objects -----------------------------------------------------------------------------------
    def apply_secret(self) -> None:
        if not (self.secret_data and self.job.secret):
            return
        body = packagejob.secret(self.job.secret, self.job.namespace, self.secret_data)
        try:
            self.client.apply_secret(body)
        except ApiError as exc:  # the answer's body may echo the Secret: only status and reason
            raise AirflowException(
                f"could not create Secret {self.job.namespace}/{self.job.secret}: {exc.status} {exc.reason}"
            ) from None

    def create(self) -> dict[str, Any]:
        try:
            created = self.client.create(packagejob.manifest(self.job), self.job.namespace)
        except ApiError as exc:
            raise AirflowException(
                f"could not create packaging Job {self.job.namespace}/{self.job.name}: {exc.status} "
                f"{self.redact(str(exc.body or exc.reason))}"
            ) from None
        self.uid = created["metadata"]["uid"]
        return created

    def cleanup(self) -> None:
        """Delete the Job this runner created (its pods with it); nothing when it created none."""
        if self.uid:
            self.client.delete(KIND, self.job.name, self.job.namespace, propagation="Background", uid=self.uid)

    # -- running: submit, wait here (execute_sync), finish — the training operator's skeleton; the
    # packaging Job has no deferrable mode (its log is the task's progress) -------------------------
    def run(self) -> PackageOutput:
        """Create the Job, wait for it and return what it pushed; raise with the Job's reason and
        the pod's log tail when it fails."""
        self.submit()
        return self.finish(self.execute_sync())

    def submit(self) -> dict[str, Any]:
        """The registry Secret and the Job."""
        self.apply_secret()
        created = self.create()
        self.log.info(
            "Packaging %s in Job %s/%s (image %s, PersistentVolumeClaim %s mounted read-only)",
            self.job.reference,
            self.job.namespace,
            self.job.name,
            self.job.image,
            self.job.claim,
        )
        return created

    def execute_sync(self) -> dict[str, Any]:
        """Wait for the Job, its pod's log followed into the task log; the finished Job."""
        follower = LogFollower(
            self.client, KIND, self.job.name, self.job.namespace, sink=self._sink, uid=self.uid
        ).start()
        try:
            obj = self.client.wait(KIND, self.job.name, self.job.namespace, uid=self.uid, timeout=self.timeout)
        except WaitTimeout:
            follower.stop(drain=1.0)
            tail = self._log(self.log_tail_lines)
            if self.on_finish_action != OnFinishAction.KEEP:
                self.cleanup()
            raise AirflowException(
                f"packaging Job {self.job.namespace}/{self.job.name} did not finish within {self.timeout:g}s"
                f"{self._tail_text(tail)}"
            ) from None
        except JobDeleted as exc:
            follower.stop(drain=1.0)
            raise AirflowException(str(exc)) from None
        follower.stop(drain=5.0)
        return obj

    def finish(self, obj: dict[str, Any]) -> PackageOutput:
        """Apply ``on_finish_action``; what the Job pushed, or raise with its reason and log tail."""
        state = job_state(obj)
        if not state.succeeded:
            tail = self._log(self.log_tail_lines)
            if OnFinishAction(self.on_finish_action).deletes(succeeded=False):
                self.cleanup()
            raise AirflowException(
                f"packaging Job {self.job.namespace}/{self.job.name} failed: {state.reason}: {state.message}"
                f"{self._tail_text(tail)}"
            )
        _, text = self._log(None)
        if OnFinishAction(self.on_finish_action).deletes(succeeded=True):
            self.cleanup()
        try:
            return packagejob.parse_log(text)
        except PackageLogError as exc:
            raise AirflowException(f"packaging Job {self.job.namespace}/{self.job.name}: {exc}") from None

    def _sink(self, line: str) -> None:
        self.log.info("%s", self.redact(line))

    def _log(self, tail_lines: int | None) -> tuple[str, str]:
        """``(pod name, its log)`` of the Job's newest pod ('' when it has none)."""
        pods = self.client.pods(KIND, self.job.name, self.job.namespace, uid=self.uid)
        if not pods:
            return "", ""
        newest: dict[str, Any] = max(pods, key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))
        pod = str(newest["metadata"]["name"])
        try:
            text = self.client.read_log(pod, self.job.namespace, container=packagejob.CONTAINER, tail_lines=tail_lines)
        except ApiError as exc:  # the failure report must not fail on a missing log
            return pod, f"(log not available: {exc.reason or exc})"
        return pod, self.redact(text)

    @staticmethod
    def _tail_text(tail: tuple[str, str]) -> str:
        pod, text = tail
        if not pod:
            return " (no pod was created; see the Job's events)"
        return f"\nlast lines of pod {pod}:\n{text.rstrip()}"
