"""``benchmarks/scale.py --quick`` itself, run as a user runs it, so it cannot rot — its entry point,
every section's code and its JSON — asserting what can be asserted without timing (its timing
goals stay in the benchmark's printout):

- deferred: 10 training tasks in a real triggerer hold at most 4 watch connections to the API server
  for their namespace (counted on the server: ``/metrics``), make no request at idle, and the one
  whose job finished succeeded; 10 KubernetesPodOperator tasks, the anchor, poll; no 5xx;
- burst: two-replica jobs of ``true`` on a private daemon, 8 clients churning beside it: every job
  ``Succeeded``, every pod seen to start, no 5xx to anyone, no node process left after
  ``embedded stop --all``;
- pod startup at steady rates beside 30 running pods: every pod started, the 30 still running;
- store: the daemon serves a seeded store and every list of the section was answered;
- and nothing of the node left on the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_quick_scale_benchmark_runs_and_holds_what_needs_no_clock(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--quick", "--json", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    results = json.loads(out.read_text())

    training, kpo = results["deferred"]
    assert training["way"] == "training" and kpo["way"] == "kpo"
    assert training["watch_resources"].get("pytorchjobs", 0) >= 1 and training["watches"] <= 4, training
    assert training["idle_rps"] < 1.0, training
    assert training["succeeded"] == training["finishing"] == 1, training
    assert kpo["idle_rps"] > 0 and kpo["succeeded"] == kpo["finishing"] == 1, kpo  # it polls
    assert training["errors_5xx"] == kpo["errors_5xx"] == 0

    burst = results["burst"]
    assert burst["succeeded"] == burst["jobs"] and burst["pods_seen"] == 2 * burst["jobs"], burst
    assert burst["errors_5xx"] == 0 and not burst["churn_5xx"] and set(burst["create_codes"]) == {"201"}, burst
    assert len(burst["churn"]) >= 5 and burst["leaked_processes"] == 0, burst

    steady = results["podstartup"]
    assert [r["measured"] for r in steady["rates"]] == [r["created"] for r in steady["rates"]], steady
    assert steady["running_at_end"] == 30 and steady["errors_5xx"] == 0 and steady["leaked_processes"] == 0, steady

    store = results["store"]
    assert store["counts"]["pods"] > 0 and len(store["lists"]) >= 5, store
    assert results["node_processes_left"] == 0
