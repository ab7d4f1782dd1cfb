"""Operators that submit a training job and wait for it: ``TrainingJobOperator`` (any kind) and one
typed operator per kind (``PyTorchJobOperator`` …).

Flow of a try: load and validate the job → find a job of this task to reattach to (task state
store, then identity labels) or submit one (name-collision policy ``if_job_exists``) → push
``job_name`` / ``job_namespace`` / ``job_uid`` / ``job_kind`` to XCom and remember the job in the
task state store (``execute``) → wait in the worker, watch-based, replica logs streamed into the task
log (``execute_sync``), or defer to :class:`TrainingJobTrigger` (``execute_async``) and resume with
the replicas' logs (``trigger_reentry``) → apply ``on_finish_action`` → return a summary or fail
with the job's reason, the failed replicas' exit codes and the tails of their logs.

The job travels as an :class:`ObjectRef` inside; at the boundaries (XCom keys, the task state
store's ``{kind, name, namespace, uid}``, the trigger's kwargs and events) it keeps the shapes
earlier versions wrote, so DAGs, the cockpit and rows written before an upgrade read it unchanged.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar, NoReturn

from airflow.sdk import BaseOperator, conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_training import compat, xcom
from airflow_provider_training.client import (
    JobDeleted,
    LogFollower,
    TrainingJobClient,
    WaitTimeout,
    job_state,
    replica_failure,
    summary,
)
from airflow_provider_training.client.errors import ApiError
from airflow_provider_training.client.logselect import (
    LogChoice,
    PodFilter,
    default_container,
    log_filter,
    prefixed,
)
from airflow_provider_training.client.state import main_container
from airflow_provider_training.hooks.training import DEFAULT, TrainingHook
from airflow_provider_training.links.training import TrainingJobLink
from airflow_provider_training.operators import identity, spec
from airflow_provider_training.operators.failures import failure_report
from airflow_provider_training.operators.lineage import TrainingLineageMixin
from airflow_provider_training.specs import JobSpecError
from airflow_provider_training.specs.actions import JobDecision, OnFinishAction, OnKillAction
from airflow_provider_training.specs.annotations import WORKING_DIR_ANNOTATION
from airflow_provider_training.specs.refs import ObjectRef
from airflow_provider_training.triggers.training import TrainingJobTrigger

STATE_KEY = "training_job"
FINISH_ACTIONS = tuple(OnFinishAction)  # str-valued: the strings users write are members
KILL_ACTIONS = tuple(OnKillAction)


def _dag_folder(context: Any) -> str | None:
    dag = context.get("dag")
    fileloc = getattr(dag, "fileloc", None)
    return os.path.dirname(os.path.abspath(fileloc)) if fileloc else None


def stored_ref(store: Any) -> ObjectRef | None:
    """The job an earlier try of this task remembered in the task state store (None: none, or a
    value this provider did not write)."""
    value = store.get(STATE_KEY) if store is not None else None
    if not isinstance(value, dict):
        return None
    try:
        return ObjectRef.from_dict(value)
    except ValueError:
        return None


def _seconds(value: float | timedelta | None) -> float | None:
    return value.total_seconds() if isinstance(value, timedelta) else (float(value) if value is not None else None)


# a replica waiting for one of these will not start on its own
STUCK_REASONS = (
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerError",
    "CreateContainerConfigError",
)


class TrainingJobOperator(TrainingLineageMixin, BaseOperator):  # lineage: operators/lineage.py
    """Submit a Kubeflow training job and wait until it has ``Succeeded`` or ``Failed``.

    :param job: the job: a dict, a YAML string, a path to a ``.yaml`` / ``.yml`` / ``.json`` file
        (read as a Jinja template, relative to the DAG folder or ``template_searchpath``), or a
        pydantic job object (``airflow_provider_training.specs.PyTorchJob`` …). Templated: strings
        inside it may use ``{{ params.epochs }}``, ``{{ run_name('train') }}`` (:mod:`.naming`)…; values that render as strings
        where the schema wants an integer or boolean (``replicas: "{{ params.replicas }}"``) are
        converted. Validated before submitting; lint warnings go to the task log.
    :param name: job name (templated); overrides ``metadata.name``. Without any name the job is
        called ``<task_id>-<hash of the run>``.
    :param namespace: namespace (templated); default: the document's, else the connection's, else
        ``default``.
    :param labels: extra labels for the job and its pods (templated).
    :param kubernetes_conn_id: a cncf.kubernetes ``kubernetes`` connection. Default: the provider
        option ``[training] kubernetes_conn_id``; empty means the embedded control plane of this
        machine, started on demand.
    :param wait_for_completion: wait until the job finishes (default). ``False`` returns right after
        submitting (or reattaching).
    :param deferrable: free the worker slot while waiting; a triggerer watches the job. Default:
        ``[operators] default_deferrable``.
    :param poll_interval: seconds between status reads when the API server cannot watch, and the
        cap of the retry back-off after a dropped connection. Waiting is watch-based otherwise: a
        waiting job costs less than one API request per minute while nothing changes.
    :param timeout: job-level timeout (seconds or ``timedelta``) from the first submission of this
        try. When it expires the job is treated as killed (``on_kill_action``) and the task fails.
    :param on_finish_action: ``"keep"`` (default: the job stays as history, its logs readable),
        ``"delete"`` (delete the job and its pods when it finished, either way), or
        ``"delete_succeeded"`` (delete only a job that succeeded; keep a failed one to inspect).
    :param on_kill_action: ``"delete"`` (default) or ``"keep"``: what happens to the job when the task
        is killed (``on_kill``; in deferrable mode the trigger's ``on_kill`` on a user's mark
        failed / success / clear — not on a triggerer restart; Airflow 3.3+, on 3.2 a kill of the
        deferred task keeps the job and the task log says so) or times out.
    :param log_replicas: whose logs stream into the task log: ``"master"`` (default: the master-role
        replica — Master, Chief or Launcher, else worker 0), ``"all"``, ``"none"``, or a list such as
        ``["master", "worker-1"]``. Lines are prefixed with the pod name. In deferrable mode the logs
        are fetched and printed when the task resumes.
    :param if_job_exists: when the name is taken. A *running* job of this very task is always
        reattached (a retry after a worker crash). Otherwise ``"reattach"`` (default) keeps a
        finished job of this task and submits the retry as ``<name>-r<try>``, and fails for someone
        else's job; ``"rename"`` always submits under a new name; ``"replace"`` deletes the existing
        job first; ``"fail"`` fails.
    :param log_tail_lines: log lines per failed replica in the error of a failed job (default 50).
    :param watch_timeout: seconds one watch request lasts before it is renewed (default 240).
    :param end_from_trigger: in deferrable mode, let the triggerer end the task when the job
        succeeded — it prints the replicas' logs, applies ``on_finish_action`` and pushes the summary
        as ``return_value`` itself — instead of resuming the task on a worker: the task is successful
        within a second or two of the job and takes no worker slot to finish (a hundred jobs
        finishing at once do not queue for the workers). A failed, timed-out or deleted job still
        resumes on a worker (failure report, retries). ``None`` (default): yes unless the task has
        ``outlets`` (asset events are emitted by a worker only) or listeners (OpenLineage, a plugin's)
        are registered, as they hear of a success only from a worker; ``True``: yes unless the task
        has ``outlets``; ``False``: always resume on a worker.

    XCom (pushed before waiting): ``job_name``, ``job_namespace``, ``job_uid``, ``job_kind`` (and
    ``job_api_url`` for the extra link). Returns a summary dict: ``kind``, ``name``, ``namespace``,
    ``uid``, ``state``, ``reason``, ``message``, ``created``, ``started``, ``completed``,
    ``replica_statuses``.
    """

    template_fields: Sequence[str] = ("job", "name", "namespace", "labels")
    template_ext: Sequence[str] = (".yaml", ".yml", ".json")
    template_fields_renderers = {"job": "yaml"}
    ui_color = "#dbe9f6"
    operator_extra_links = (TrainingJobLink(),)
    kind: ClassVar[str | None] = None

    def __init__(
        self,
        job: Any,
        *,
        name: str | None = None,
        namespace: str | None = None,
        labels: dict[str, str] | None = None,
        kubernetes_conn_id: str | None = DEFAULT,
        wait_for_completion: bool = True,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 10.0,
        timeout: float | timedelta | None = None,
        on_finish_action: str = "keep",
        on_kill_action: str = "delete",
        log_replicas: str | Sequence[str] = "master",
        if_job_exists: str = "reattach",
        log_tail_lines: int = 50,
        watch_timeout: float = 240.0,
        end_from_trigger: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        from airflow_provider_training.specs import TrainingJob

        # A model becomes a dict so Jinja can render the strings inside it.
        self.job = job.to_dict() if isinstance(job, TrainingJob) else job
        self.name = name
        self.namespace = namespace
        self.labels = labels or {}
        self.kubernetes_conn_id = kubernetes_conn_id
        self.wait_for_completion = wait_for_completion
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.timeout = timeout
        if on_finish_action not in FINISH_ACTIONS:
            raise ValueError(f"on_finish_action must be one of {', '.join(FINISH_ACTIONS)} (got {on_finish_action!r})")
        if on_kill_action not in KILL_ACTIONS:
            raise ValueError(f"on_kill_action must be one of {', '.join(KILL_ACTIONS)} (got {on_kill_action!r})")
        if if_job_exists not in identity.POLICIES:
            raise ValueError(f"if_job_exists must be one of {', '.join(identity.POLICIES)} (got {if_job_exists!r})")
        self.on_finish_action = on_finish_action
        self.on_kill_action = on_kill_action
        self.log_replicas = log_replicas
        self.if_job_exists = if_job_exists
        self.log_tail_lines = log_tail_lines
        self.watch_timeout = watch_timeout
        self.end_from_trigger = end_from_trigger
        self._submitted: ObjectRef | None = None  # the job this try waits for (for on_kill)
        self._phase = ""  # the job's phase last logged by the sync path

    # -- plumbing ---------------------------------------------------------------------------------

    def hook(self) -> TrainingHook:
        return TrainingHook(kubernetes_conn_id=self.kubernetes_conn_id)

    def client(self, hook: TrainingHook) -> TrainingJobClient:
        return hook.get_client(watch_timeout=self.watch_timeout, poll_interval=self.poll_interval)

    def build(self, context: Any, hook: TrainingHook) -> dict[str, Any]:
        """The document to submit: loaded, coerced, named, labelled with the task's identity, validated."""
        ti = context["ti"]
        try:
            data = self.load_document()
        except JobSpecError as exc:
            raise AirflowFailException(f"task {self.task_id}: {exc}") from None
        meta = data.get("metadata") or {}
        run_id = context["run_id"]
        map_index = int(getattr(ti, "map_index", -1) if getattr(ti, "map_index", None) is not None else -1)
        name = self.name or meta.get("name") or identity.default_name(self.task_id, run_id, map_index)
        namespace = self.namespace or meta.get("namespace") or hook.get_namespace() or "default"
        labels = {**self.labels, **identity.identity_labels(ti.dag_id, ti.task_id, run_id, map_index, ti.try_number)}
        annotations = {
            f"{identity.PREFIX}/run-id": run_id,
            f"{identity.PREFIX}/dag-id": ti.dag_id,
            f"{identity.PREFIX}/task-id": ti.task_id,
        }
        # The embedded control plane runs replicas in the DAG's folder, so a command such as
        # `python code/train.py` finds the code shipped next to the DAG; a cluster ignores it.
        dag_folder = _dag_folder(context)
        if dag_folder and WORKING_DIR_ANNOTATION not in (meta.get("annotations") or {}):
            annotations[WORKING_DIR_ANNOTATION] = dag_folder
        data = spec.apply(data, name=name, namespace=namespace, labels=labels, annotations=annotations)
        try:
            report = self.check_document(data)
        except JobSpecError as exc:
            raise AirflowFailException(f"task {self.task_id}: {exc}") from None
        for warning in report.warnings:
            self.log.warning("%s: %s", report.title, warning)
        return data

    def load_document(self) -> dict[str, Any]:
        """``job`` as a dict of this operator's kind (subclasses for other APIs override it)."""
        return spec.load(self.job, self.kind)

    def check_document(self, data: dict[str, Any]) -> Any:
        """Validate; raise :class:`JobSpecError` on errors; return the report (``warnings``, ``title``)."""
        _, report = spec.check(data)
        return report

    def log_choice(self, job: dict[str, Any]) -> LogChoice:
        """Whose logs reach the task log: ``log_replicas`` (subclasses with another default override it)."""
        return self.log_replicas

    def pod_filter(self, job: dict[str, Any]) -> PodFilter | None:
        """Which pods' logs reach the task log; None: none."""
        return log_filter(self.log_choice(job), job)

    def on_job_change(self, obj: dict[str, Any]) -> None:
        """Every new version of the job while the task waits (progress reports; nothing by default)."""

    # -- reattach or submit -----------------------------------------------------------------------

    def _stored(self, context: Any, client: TrainingJobClient, kind: str) -> dict[str, Any] | None:
        """The job this task submitted in an earlier try, if it still runs (fenced by uid)."""
        ref = stored_ref(compat.task_state_store(context))
        if ref is None or ref.kind != kind:
            return None
        found = client.find(ref.kind, ref.name, ref.namespace)
        if found is None or found["metadata"].get("uid") != ref.uid:
            return None
        if job_state(found).finished:
            self.log.info("%s from an earlier try has finished (%s); it stays as history", ref, job_state(found).phase)
            return None
        return found

    def _labelled(self, client: TrainingJobClient, body: dict[str, Any]) -> dict[str, Any] | None:
        """A running job with this task's identity labels (when the state store had nothing)."""
        meta = body["metadata"]
        found = [
            j
            for j in client.list(body["kind"], meta["namespace"], identity.selector(meta["labels"]))
            if not job_state(j).finished
        ]
        if len(found) > 1:
            self.log.warning(
                "%d running jobs carry this task's identity: %s; reattaching to the newest",
                len(found),
                ", ".join(j["metadata"]["name"] for j in found),
            )
        return max(found, key=lambda j: str(j["metadata"].get("creationTimestamp", ""))) if found else None

    def submit_or_reattach(self, context: Any, client: TrainingJobClient, body: dict[str, Any]) -> dict[str, Any]:
        kind, meta = body["kind"], body["metadata"]
        existing, found_by = self._stored(context, client, kind), "the task state store"
        if existing is None:
            existing, found_by = self._labelled(client, body), "its identity labels"
        if existing is not None:
            self.log.info(
                "Reattaching to %s (uid %s), still %s (found through %s)",
                ObjectRef.of(existing, kind),
                existing["metadata"]["uid"],
                job_state(existing).phase,
                found_by,
            )
            return existing
        base, try_number = meta["name"], int(context["ti"].try_number)
        for attempt in range(5):
            current = client.find(kind, meta["name"], meta["namespace"])
            decision = identity.on_existing(current, meta["labels"], self.if_job_exists)
            if decision.action == JobDecision.REATTACH and current is not None:
                self.log.info("%s", decision.why)
                return current
            if decision.action == JobDecision.FAIL:
                raise AirflowFailException(decision.why)
            if decision.action == JobDecision.RENAME:
                self.log.info("%s", decision.why)
                meta["name"] = identity.retry_name(base, try_number, attempt)
                continue
            if decision.action == JobDecision.REPLACE and current is not None:
                self.log.info("%s", decision.why)
                client.delete(kind, meta["name"], meta["namespace"], uid=current["metadata"]["uid"])
            created = client.create(body)
            self.log.info("Submitted %s (uid %s)", ObjectRef.of(created, kind), created["metadata"]["uid"])
            return created
        raise AirflowFailException(f"could not find a free name for {kind} {meta['namespace']}/{base}")

    def remember(self, context: Any, hook: TrainingHook, job: dict[str, Any]) -> None:
        """XCom and the task state store, before any waiting: a crash or kill still leaves the trail."""
        ref = ObjectRef.of(job)
        ti = context["ti"]
        for key, value in (
            (xcom.JOB_NAME, ref.name),
            (xcom.JOB_NAMESPACE, ref.namespace),
            (xcom.JOB_UID, ref.uid),
            (xcom.JOB_KIND, ref.kind),
            (xcom.JOB_API_URL, hook.api_url),
            (xcom.JOB_CONN_ID, hook.kubernetes_conn_id or ""),  # for the UI plugin: the same connection
        ):
            ti.xcom_push(key=key, value=value)
        store = compat.task_state_store(context)
        if store is not None:
            store.set(STATE_KEY, ref.to_dict())
        self._submitted = ref

    # -- execute: submit, then wait here (execute_sync) or in the triggerer (execute_async, resumed
    # in trigger_reentry), as cncf.kubernetes' KubernetesPodOperator splits it -------------------------

    def execute(self, context: Any) -> Any:
        hook = self.hook()
        client = self.client(hook)
        job = self.submit_or_reattach(context, client, self.build(context, hook))
        self.remember(context, hook, job)
        if not self.wait_for_completion:
            return summary(job)
        if self.deferrable and not job_state(job).finished:
            self.execute_async(hook, job)
        return self.execute_sync(client, job)

    def execute_sync(self, client: TrainingJobClient, job: dict[str, Any]) -> Any:
        """Wait in this worker, the replicas' logs streamed into the task log, then finish."""
        ref = ObjectRef.of(job)
        follower = self._follow_logs(client, job)
        self._phase = ""
        try:
            final = client.wait(
                ref.kind, ref.name, ref.namespace, uid=ref.uid, timeout=_seconds(self.timeout), on_change=self._changed
            )
        except WaitTimeout as exc:
            stuck = self._stuck_replicas(client, ref)
            self._abandon(client, "the job-level timeout expired")
            raise AirflowException(str(exc) + stuck) from None
        except JobDeleted as exc:
            raise AirflowException(str(exc)) from None
        finally:
            if follower is not None:
                follower.stop(drain=5.0)
        return self.finish(client, final)

    def execute_async(self, hook: TrainingHook, job: dict[str, Any]) -> NoReturn:
        """Free the worker slot: :class:`TrainingJobTrigger` waits in the triggerer; the task resumes
        in :meth:`trigger_reentry`. The job-level timeout becomes a wall-clock deadline, so it holds
        across triggerer restarts."""
        timeout = _seconds(self.timeout)
        if unsupported := compat.deferred_kill_unsupported(self.on_kill_action):
            self.log.warning("%s", unsupported)
        self.defer(
            trigger=TrainingJobTrigger(
                ref=ObjectRef.of(job),
                **hook.trigger_connection(),
                poll_interval=self.poll_interval,
                watch_timeout=self.watch_timeout,
                deadline=None if timeout is None else time.time() + timeout,
                on_kill_action=self.on_kill_action,
                end_from_trigger=self._ends_in_triggerer(),
                log_replicas=self.log_choice(job),
                on_finish_action=str(self.on_finish_action),
                push_summary=bool(self.do_xcom_push),
            ),
            method_name="trigger_reentry",
        )

    def _ends_in_triggerer(self) -> bool:
        """``end_from_trigger`` resolved for this try (see the parameter)."""
        if self.end_from_trigger is False or compat.triggers_run_inline():
            return False
        if self.outlets:
            if self.end_from_trigger:
                self.log.info("end_from_trigger: the task resumes on a worker, which emits its outlets' asset events")
            return False
        return bool(self.end_from_trigger) or not compat.task_listeners()

    def trigger_reentry(self, context: Any, event: dict[str, Any] | str) -> Any:
        """Resume after deferral: print the replicas' logs, then finish like the sync path."""
        client = self.client(self.hook())
        if not isinstance(event, dict):
            # The trigger ended the task ("success"), but this Airflow resumed it anyway: ``dag.test()``
            # runs triggers inline and resumes with any event's payload. The trigger did the work
            # already; finish from the job this try remembered.
            ref = self._submitted = self._remembered(context)
            job = client.find(ref.kind, ref.name, ref.namespace)
            return self.finish(client, job) if job is not None else ref.to_dict()
        ref = self._submitted = ObjectRef.from_dict(event)
        status = event.get("status")
        if status == "timeout":
            self._print_logs(client, ref)
            stuck = self._stuck_replicas(client, ref)
            self._abandon(client, "the job-level timeout expired")
            raise AirflowException((event.get("message") or "the job did not finish in time") + stuck)
        if status != "finished":
            raise AirflowException(event.get("message") or f"waiting for the job failed ({status})")
        job = client.get(ref.kind, ref.name, ref.namespace)
        self._print_logs(client, ref, job)
        return self.finish(client, job)

    def _remembered(self, context: Any) -> ObjectRef:
        """The job this try submitted, from the task state store, else from its XComs."""
        ref = stored_ref(compat.task_state_store(context))
        if ref is not None:
            return ref
        ti = context["ti"]
        keys = (xcom.JOB_KIND, xcom.JOB_NAMESPACE, xcom.JOB_NAME, xcom.JOB_UID)
        kind, namespace, name, uid = (
            ti.xcom_pull(task_ids=ti.task_id, key=key, map_indexes=ti.map_index) for key in keys
        )
        if not (kind and namespace and name):
            raise AirflowException("resumed without the job: neither the task state store nor XCom names it")
        return ObjectRef(str(kind), str(namespace), str(name), str(uid) if uid else None)

    def execute_complete(self, context: Any, event: dict[str, Any] | str) -> Any:
        """Resume a deferral recorded before :meth:`trigger_reentry` was the resume method."""
        return self.trigger_reentry(context, event)

    # -- logs and progress ------------------------------------------------------------------------

    def _follow_logs(self, client: TrainingJobClient, job: dict[str, Any]) -> LogFollower | None:
        select = self.pod_filter(job)
        if select is None:
            return None
        ref = ObjectRef.of(job)
        return LogFollower(
            client,
            ref.kind,
            ref.name,
            ref.namespace,
            sink=self._log_line,
            select=select,
            uid=ref.uid,
            container=default_container(ref.kind),
        ).start()

    def _changed(self, obj: dict[str, Any]) -> None:
        """Each new version of the job while the sync path waits: log phase changes."""
        self.on_job_change(obj)
        state = job_state(obj)
        if state.phase != self._phase:
            self._phase = state.phase
            self.log.info("%s is %s%s", ObjectRef.of(obj), state.phase, f": {state.message}" if state.message else "")

    def _print_logs(self, client: TrainingJobClient, ref: ObjectRef, job: dict[str, Any] | None = None) -> None:
        """After a deferral: the last lines of the selected replicas' logs into the task log."""
        job = job or client.find(ref.kind, ref.name, ref.namespace)
        select = self.pod_filter(job) if job else None
        if select is None:
            return
        for line in prefixed(client.replica_logs(ref.kind, ref.name, ref.namespace, uid=ref.uid, select=select)):
            self._log_line(line)

    def _stuck_replicas(self, client: TrainingJobClient, ref: ObjectRef) -> str:
        """Why replicas never ran, for a timeout's message: each pod's container waiting with a
        reason a person must act on (an image that cannot be pulled, a config that cannot be made)."""
        try:
            pods = client.pods(ref.kind, ref.name, ref.namespace, uid=ref.uid)
        except ApiError:
            return ""
        found = []
        for pod in pods:
            status = pod.get("status") or {}
            for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
                waiting = (container.get("state") or {}).get("waiting") or {}
                if waiting.get("reason") in STUCK_REASONS:
                    found.append(
                        f"{pod['metadata']['name']} ({container.get('image', '')}): {waiting['reason']}: "
                        f"{str(waiting.get('message') or '')[:500]}"
                    )
                    break
        return ("; replicas not running: " + "; ".join(found)) if found else ""

    def _log_line(self, line: str) -> None:
        self.log.info("%s", line)

    # -- finishing --------------------------------------------------------------------------------

    def finish(self, client: TrainingJobClient, job: dict[str, Any]) -> dict[str, Any]:
        """Apply ``on_finish_action``; return the summary, or raise with the failure report."""
        state = job_state(job)
        ref = ObjectRef.of(job)
        result = summary(job)
        if state.succeeded:
            self.log.info("%s succeeded: %s", ref, state.message)
            if OnFinishAction(self.on_finish_action).deletes(succeeded=True):
                client.delete(ref.kind, ref.name, ref.namespace, uid=ref.uid, propagation="Background")
            return result
        report = self.failure(client, job)
        if OnFinishAction(self.on_finish_action).deletes(succeeded=False):
            client.delete(ref.kind, ref.name, ref.namespace, uid=ref.uid, propagation="Background")
        raise AirflowException(report)

    def failure(self, client: TrainingJobClient, job: dict[str, Any]) -> str:
        """The failure report: the job's reason, the failed replicas' exit codes and log tails, the
        Warning events. Logs or events the server cannot give are left out, not fatal."""
        ref = ObjectRef.of(job)
        container = default_container(ref.kind)
        pods = client.pods(ref.kind, ref.name, ref.namespace, uid=ref.uid)
        failures = [f for p in pods if (f := replica_failure(p, main_container(p, container))) is not None]
        tails: dict[str, str] = {}
        for failed in failures:
            pod = next(p for p in pods if p["metadata"]["name"] == failed.pod)
            try:
                tails[failed.pod] = client.read_log(
                    failed.pod, ref.namespace, container=main_container(pod, container), tail_lines=self.log_tail_lines
                )
            except ApiError as exc:
                tails[failed.pod] = f"(log not available: {exc.reason or exc})"
        try:
            events = client.events(ref.kind, ref.name, ref.namespace, uid=ref.uid)
        except ApiError:
            events = []
        return failure_report(job, failures, tails, events)

    def _abandon(self, client: TrainingJobClient, why: str) -> None:
        ref = self._submitted
        if ref is None:
            return
        if self.on_kill_action == OnKillAction.DELETE:
            gone = client.delete(ref.kind, ref.name, ref.namespace, uid=ref.uid)
            self.log.info("%s: %s %s", why, ref, "deleted" if gone else "was already gone")
        else:
            self.log.info("%s: %s kept (on_kill_action='keep')", why, ref)

    def on_kill(self) -> None:
        """The running task is being killed (user action, SIGTERM, execution_timeout): apply
        ``on_kill_action`` to the job this try waits for."""
        if self._submitted is None:
            return
        try:
            self._abandon(self.client(self.hook()), "the task was killed")
        except Exception:  # the kill goes on whatever happens here (the connection, the server): say why
            self.log.exception("could not apply on_kill_action to %s", self._submitted)


class PyTorchJobOperator(TrainingJobOperator):
    """Submit a PyTorchJob and wait for it (see :class:`TrainingJobOperator` for every parameter, XCom and the
    return value). ``job`` may leave out ``apiVersion`` and ``kind``; a document of another kind is refused."""

    kind = "PyTorchJob"


class TFJobOperator(TrainingJobOperator):
    """Submit a TFJob and wait for it (see :class:`TrainingJobOperator` for every parameter, XCom and the
    return value). ``job`` may leave out ``apiVersion`` and ``kind``; a document of another kind is refused."""

    kind = "TFJob"


class MPIJobOperator(TrainingJobOperator):
    """Submit a MPIJob and wait for it (see :class:`TrainingJobOperator` for every parameter, XCom and the
    return value). ``job`` may leave out ``apiVersion`` and ``kind``; a document of another kind is refused."""

    kind = "MPIJob"


class XGBoostJobOperator(TrainingJobOperator):
    """Submit a XGBoostJob and wait for it (see :class:`TrainingJobOperator` for every parameter, XCom and the
    return value). ``job`` may leave out ``apiVersion`` and ``kind``; a document of another kind is refused."""

    kind = "XGBoostJob"


class PaddleJobOperator(TrainingJobOperator):
    """Submit a PaddleJob and wait for it (see :class:`TrainingJobOperator` for every parameter, XCom and the
    return value). ``job`` may leave out ``apiVersion`` and ``kind``; a document of another kind is refused."""

    kind = "PaddleJob"


class MXJobOperator(TrainingJobOperator):
    """Submit a MXJob and wait for it (see :class:`TrainingJobOperator` for every parameter, XCom and the
    return value). ``job`` may leave out ``apiVersion`` and ``kind``; a document of another kind is refused."""

    kind = "MXJob"


class JAXJobOperator(TrainingJobOperator):
    """Submit a JAXJob and wait for it (see :class:`TrainingJobOperator` for every parameter, XCom and the
    return value). ``job`` may leave out ``apiVersion`` and ``kind``; a document of another kind is refused."""

    kind = "JAXJob"
