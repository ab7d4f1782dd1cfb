"""What the cockpit says when the cluster fails: a refused connection is not an HTTP answer."""

from __future__ import annotations

from airflow_provider_training.client.errors import NotFound, typed


def test_a_refused_connection_reads_did_not_answer_and_an_answer_keeps_its_status() -> None:
    import aiohttp

    from airflow_provider_training.ui.app import _cluster_error

    refused = typed(aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:1"))
    assert refused is not None
    assert _cluster_error(refused) == (
        "the cluster did not answer: ClientConnectionError: Cannot connect to host 127.0.0.1:1"
    )
    assert _cluster_error(NotFound(404, "Not Found")) == "the cluster answered 404 Not Found"
