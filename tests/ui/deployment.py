"""A real Airflow 3.3 deployment for the cockpit's browser tests and benchmark: api-server,
scheduler, dag-processor and triggerer as separate processes on a free port, in a temporary
AIRFLOW_HOME (SQLite, LocalExecutor, Simple auth manager with fixed users).

Stands in for the shared ``tests/fixtures/airflow_deployment.py`` until that lands; the tests use
only ``url``, ``token(user)``, ``api(...)``, ``trigger(...)``, ``wait_run(...)`` and ``users``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fixtures.registry import free_port

USERS = {"admin": "admin", "viewer": "viewer", "outsider": ""}  # outsider: signed in, no role


@dataclass
class Deployment:
    home: Path
    dags: Path
    env: dict[str, str]
    port: int
    passwords: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _tokens: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def create(cls, root: Path, *, extra_env: dict[str, str] | None = None) -> Deployment:
        home, dags = root / "airflow", root / "dags"
        home.mkdir(parents=True, exist_ok=True)
        dags.mkdir(parents=True, exist_ok=True)
        port = free_port()
        passwords = {user: f"{user}-{secrets.token_hex(4)}" for user in USERS}
        (home / "passwords.json").write_text(json.dumps(passwords))
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__") and k not in ("AIRFLOW_HOME",)}
        env.update(
            {
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": "4",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(port),
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
                "AIRFLOW__CORE__AUTH_MANAGER": (
                    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
                ),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS.items()),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "3",
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
                "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            }
        )
        env.update(extra_env or {})
        return cls(home, dags, env, port, passwords)

    def _spawn(self, *args: str) -> None:
        log = open(self.home / f"{args[0]}.log", "ab")  # noqa: SIM115 - the process keeps it
        self.procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "airflow", *args],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def start(self, timeout: float = 240.0) -> None:
        subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            env=self.env,
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            timeout=300,
        )
        for component in ("api-server", "scheduler", "dag-processor", "triggerer"):
            self._spawn(component)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args[3]} exited with {proc.returncode}: {self.logs()}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"the api-server did not answer in {timeout}s: {self.logs()}")

    def logs(self, lines: int = 40) -> str:
        out = []
        for path in sorted(self.home.glob("*.log")):
            out.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)

    # -- REST -----------------------------------------------------------------------------------

    def token(self, user: str = "admin") -> str:
        if user not in self._tokens:
            body = json.dumps({"username": user, "password": self.passwords[user]}).encode()
            request = urllib.request.Request(
                f"{self.url}/auth/token", data=body, headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                self._tokens[user] = json.loads(response.read())["access_token"]
        return self._tokens[user]

    def api(self, method: str, path: str, body: Any = None, *, user: str | None = "admin") -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if user is not None:
            headers["Authorization"] = f"Bearer {self.token(user)}"
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=None if body is None else json.dumps(body).encode(),
            headers=headers,
            method=method,
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, raw.decode(errors="replace")

    def add_dag(self, source: Path | str, name: str | None = None) -> None:
        if isinstance(source, Path):
            shutil.copy(source, self.dags / (name or source.name))
        else:
            (self.dags / (name or "dag.py")).write_text(source)

    def wait_dag(self, dag_id: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, _ = self.api("GET", f"/api/v2/dags/{dag_id}")
            if status == 200:
                return
            time.sleep(1)
        raise TimeoutError(f"DAG {dag_id} was not parsed in {timeout}s: {self.logs()}")

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        status, body = self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf or {}})
        assert status == 200, body
        return str(body["dag_run_id"])

    def task_state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        status, body = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")
        return body.get("state") if status == 200 else None

    def wait_task(self, dag_id: str, run_id: str, task_id: str, states: tuple[str, ...], timeout: float = 300.0) -> str:
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = self.task_state(dag_id, run_id, task_id)
            if state in states:
                return state
            time.sleep(1)
        raise TimeoutError(f"{dag_id}/{run_id}/{task_id} is {state}, not {states}: {self.logs()}")
