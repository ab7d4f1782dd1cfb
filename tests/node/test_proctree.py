"""``node/proctree.py``: an exec'd command's whole tree is found and killed, also the parts that left
its process group, and a recorded pid the kernel gave to another process is left alone."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_training.embedded.node import proctree
from tests.waiting import alive

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

# a child in a process group of its own (job control, say): killpg of the session leader misses it
ESCAPES_GROUP = (
    f"{sys.executable} -c 'import os, time; os.setpgid(0, 0); print(os.getpid(), flush=True); time.sleep(100)' &"
    f" {sys.executable} -c 'import time; time.sleep(100)' & wait"
)


def test_the_whole_session_goes_also_what_left_the_group() -> None:
    leader = subprocess.Popen(["sh", "-c", ESCAPES_GROUP], stdout=subprocess.PIPE, start_new_session=True, text=True)
    try:
        assert leader.stdout is not None
        escaped = int(leader.stdout.readline())
        escaped_stat, leader_stat = proctree.stat(escaped), proctree.stat(leader.pid)
        assert escaped_stat is not None and escaped_stat.pgrp == escaped != leader.pid
        assert leader_stat is not None and escaped_stat.session == leader.pid
        deadline = time.monotonic() + 10
        while len(proctree.members(leader.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        tree = proctree.members(leader.pid)
        assert {leader.pid, escaped} <= tree and len(tree) == 3
        assert proctree.kill_tree(leader.pid, leader_stat.starttime) >= 3
        leader.wait(10)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in tree) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not any(alive(pid) for pid in tree)
    finally:
        leader.kill()
        leader.wait()


def test_a_pid_given_to_another_process_is_left_alone() -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(100)"], start_new_session=True)
    try:
        found = proctree.stat(other.pid)
        assert found is not None
        assert proctree.kill_tree(other.pid, found.starttime + 1) == 0  # recorded for an earlier process
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
