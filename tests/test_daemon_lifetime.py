"""A test session killed outright (``kill -9``, a CI timeout) runs no teardown: the daemons its
fixtures started must still end with it, not hold their ports and the machine's cores for the next
session. Checked with the deployment fixture's PostgreSQL, started by a stand-in session process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from tests.paths import ROOT
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

SESSION = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tests.fixtures._postgres import start_postgres
    server = start_postgres(Path(sys.argv[1]))
    print(server.process.pid, server.datadir, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.skipif(not Path("/usr/lib/postgresql").exists(), reason="needs Debian's postgresql")
def test_postgres_ends_when_the_session_that_started_it_is_killed(tmp_path: Path) -> None:
    session = subprocess.Popen(
        [sys.executable, "-c", SESSION, str(tmp_path / "postgres.log")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert session.stdout is not None
        pid_text, datadir = session.stdout.readline().split()
        postmaster = psutil.Process(int(pid_text))
        assert "postgres" in " ".join(postmaster.cmdline())
        session.send_signal(signal.SIGKILL)
        session.wait(10)
        wait_for(
            lambda: not postmaster.is_running() or postmaster.status() == psutil.STATUS_ZOMBIE, 30, "PostgreSQL to end"
        )
    finally:
        if session.poll() is None:
            session.kill()
    import shutil

    shutil.rmtree(datadir, ignore_errors=True)  # (its data directory is the teardown's to remove)
