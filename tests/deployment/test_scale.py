"""``benchmarks/scale.py`` at small N, so it cannot rot, asserting what can be asserted without
timing (its timing goals stay in the benchmark's printout):

- deferred training tasks in the deployment's one triggerer hold at most 4 watch connections to the
  API server for their namespace (counted on the server: ``/metrics``), every one of them deferred
  and every finished one succeeded, no 5xx;
- a burst of two-replica jobs of ``true`` on a private daemon, 8 clients churning beside it: every
  job ``Succeeded``, every pod seen to start, no 5xx to anyone, no node process left after
  ``embedded stop --all``;
- pod startup as upstream measures it: 30 long-running pods on the node, single-pod workloads
  created at a steady rate beside them: every pod seen to start, the 30 still running, no 5xx, no
  node process left.
"""

from __future__ import annotations

from typing import Any

import pytest
from benchmarks._scale_burst import run_burst
from benchmarks._scale_deferred import deferred
from benchmarks._scale_podstartup import SATURATING, run_podstartup

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

N_DEFERRED = 10  # > 4: a watch per task would fail the count
N_JOBS = 12


def test_deferred_training_tasks_in_a_real_triggerer_share_their_watch(
    airflow_deployment: Any, control_plane: Any
) -> None:
    [result] = deferred(airflow_deployment, control_plane, "training", [N_DEFERRED], idle=3.0, say=lambda _: None)
    assert result["watch_resources"].get("pytorchjobs", 0) >= 1 and result["watches"] <= 4, result
    assert result["succeeded"] == result["finishing"] == N_DEFERRED // 10, result
    assert result["errors_5xx"] == 0, result


def test_a_burst_of_jobs_all_succeed_with_no_5xx_and_no_process_left() -> None:
    result = run_burst(N_JOBS, churn=True)
    assert result["succeeded"] == N_JOBS, result
    assert result["pods_seen"] == 2 * N_JOBS and len(result["churn"]) >= 5, result
    assert result["errors_5xx"] == 0 and not result["churn_5xx"], result
    assert set(result["create_codes"]) == {201}, result
    assert result["leaked_processes"] == 0, result


def test_pods_created_at_a_steady_rate_beside_30_running_ones_all_start() -> None:
    result = run_podstartup([5.0], seconds=4.0)
    [step] = result["rates"]
    assert step["created"] == 20 and step["measured"] == step["created"], result
    assert result["running_at_end"] == SATURATING, result
    assert result["errors_5xx"] == 0, result
    assert result["leaked_processes"] == 0, result
