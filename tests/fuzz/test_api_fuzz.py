"""The fuzz tier's CI slice: generated bodies, query strings and patches at every route of the
embedded API. No answer is a 5xx, the daemon keeps serving, and afterwards every list of the
namespace still decodes with the official ``kubernetes`` client and with kubectl.

``AIRFLOW_TRAINING_FUZZ_EXAMPLES`` sets the number of cases (default 150, about 20 s here);
``benchmarks/hardening.py`` runs a longer slice."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, Phase, given, settings

from airflow_provider_training.embedded import ControlPlane, serviceaccount
from tests.fuzz.cases import Case, Credentials, cases, credentials, send, send_credentials

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
EXAMPLES = int(os.environ.get("AIRFLOW_TRAINING_FUZZ_EXAMPLES", "150"))


def generated(examples: int, derandomize: bool = True) -> settings:
    """Hypothesis as the fuzz tier runs it: generation only, no deadline, no example database."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=derandomize,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )


def run_fuzz(
    http: httpx.Client, namespace: str, examples: int, seed: int | None = None
) -> tuple[Counter[int], list[str]]:
    """Send ``examples`` generated cases; returns (how many got each status code, problems)."""
    problems: list[str] = []
    codes: Counter[int] = Counter()

    @generated(examples, derandomize=seed is None)
    @given(case=cases(namespace))
    def one(case: Case) -> None:
        try:
            code = send(http, case)
        except httpx.HTTPError as exc:
            problems.append(f"{case}: {type(exc).__name__}: {exc}")
            return
        codes[code] += 1
        if code >= 500:
            problems.append(f"{case}: {code}")

    one()
    return codes, problems


def lists_decode(plane: ControlPlane, kube_api: Any, namespace: str) -> None:
    from kubernetes import client

    core, batch, rbac = client.CoreV1Api(kube_api), client.BatchV1Api(kube_api), client.RbacAuthorizationV1Api(kube_api)
    for lister in (
        core.list_namespaced_service_account,
        rbac.list_namespaced_role,
        rbac.list_namespaced_role_binding,
        core.list_namespaced_config_map,
        core.list_namespaced_secret,
        core.list_namespaced_pod,
        core.list_namespaced_service,
        core.list_namespaced_persistent_volume_claim,
        core.list_namespaced_event,
        batch.list_namespaced_job,
    ):
        lister(namespace)
    core.list_pod_for_all_namespaces()
    client.CustomObjectsApi(kube_api).list_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs")
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "KUBECACHEDIR": str(plane.home / "kube-cache")}
    kinds = (
        "configmaps,secrets,pods,services,persistentvolumeclaims,events,jobs,pytorchjobs,inferenceservices,"
        "serviceaccounts,roles,rolebindings"
    )
    for args in (["get", kinds, "-n", namespace, "-o", "json"], ["get", kinds, "-n", namespace]):
        done = subprocess.run([str(KUBECTL), *args], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr


def test_generated_requests_get_no_5xx_and_everything_still_decodes(
    control_plane: ControlPlane, kube_api: Any, test_namespace: str
) -> None:
    with httpx.Client(
        base_url=control_plane.api_url,
        verify=str(control_plane.ca),
        headers={"Authorization": f"Bearer {control_plane.token}"},
        timeout=httpx.Timeout(20, read=5),
    ) as http:
        codes, problems = run_fuzz(http, test_namespace, EXAMPLES)
        assert sum(codes.values()) >= min(EXAMPLES, 50)
        assert codes[200] + codes[201] > 0 and codes[400] > 0 and codes[422] > 0, codes  # reached every layer
        assert not problems, "\n".join(problems[:10])
        assert http.get("/healthz").text == "ok"
    lists_decode(control_plane, kube_api, test_namespace)


def test_generated_credentials_are_refused_never_a_5xx_and_only_the_servers_signature_counts(
    control_plane: ControlPlane, kube_api: Any, test_namespace: str
) -> None:
    """Tokens that are garbage, forged (any signature but the server's), signed by the server over
    altered claims (types, infinities, other namespaces, no expiry), and the admin's token with
    generated ``Impersonate-*`` headers: no answer is a 5xx; an unsigned token is never answered;
    a signed one never reads a Secret (its account, ``default``, may not)."""
    from kubernetes import client

    account = client.CoreV1Api(kube_api).read_namespaced_service_account("default", test_namespace)
    key = serviceaccount.signing_key(control_plane.home)
    problems: list[str] = []
    codes: Counter[int] = Counter()

    @generated(EXAMPLES)
    @given(creds=credentials(test_namespace, control_plane.token, key, account.metadata.uid))
    def one(creds: Credentials) -> None:
        try:
            code = send_credentials(control_plane.api_url, str(control_plane.ca), creds)
        except httpx.HTTPError as exc:
            problems.append(f"{creds}: {type(exc).__name__}: {exc}")
            return
        codes[code] += 1
        if code >= 500:
            problems.append(f"{creds}: {code}")
        elif creds.kind in ("garbage", "forged") and code < 400:
            problems.append(f"{creds}: answered {code} to a token the server did not sign")
        elif creds.kind == "signed" and "/secrets/" in creds.path and code < 400:
            problems.append(f"{creds}: read a Secret with the default account's token")

    one()
    assert codes[401] > 0 and codes[403] > 0 and codes[200] + codes[201] > 0, codes  # every outcome reached
    assert not problems, "\n".join(problems[:10])
