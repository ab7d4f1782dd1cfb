"""Provider metadata read by Airflow's ProvidersManager through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_provider_training import __version__, compat


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-training",
        "name": "Kubeflow Training",
        "description": (
            "Submit Kubeflow training jobs (PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob, MXJob, "
            "JAXJob), wait for them, pack the model as a KitOps ModelKit, push it to an OCI registry "
            "such as Tencent Container Registry, and deploy it. Runs on a cluster with the Training "
            "Operator or on the embedded control plane that ships with the provider."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Kubeflow Training Operator",
                "external-doc-url": "https://www.kubeflow.org/docs/components/trainer/legacy-v1/",
                "tags": ["software"],
            },
            {
                "integration-name": "KitOps",
                "external-doc-url": "https://kitops.org/docs/",
                "tags": ["software"],
            },
            {
                "integration-name": "KServe",
                "external-doc-url": "https://kserve.github.io/website/",
                "tags": ["software"],
            },
        ],
        "operators": [
            {
                "integration-name": "Kubeflow Training Operator",
                "python-modules": ["airflow_provider_training.operators"],
            },
            {
                "integration-name": "KitOps",
                "python-modules": ["airflow_provider_training.operators.modelkit"],
            },
            {
                "integration-name": "KServe",
                "python-modules": ["airflow_provider_training.operators.deploy"],
            },
        ],
        "extra-links": [
            "airflow_provider_training.links.modelkit.ModelKitRegistryLink",
            "airflow_provider_training.links.training.TrainingJobLink",
        ],
        "plugins": [
            {
                "name": "airflow-provider-training",
                "plugin-class": "airflow_provider_training.ui.plugin.TrainingCockpitPlugin",
            },
        ],
        "sensors": [
            {
                "integration-name": "Kubeflow Training Operator",
                "python-modules": ["airflow_provider_training.sensors"],
            },
        ],
        "hooks": [
            {
                "integration-name": "KitOps",
                "python-modules": ["airflow_provider_training.hooks.registry"],
            },
            {
                "integration-name": "KitOps",
                "python-modules": ["airflow_provider_training.hooks.signing"],
            },
            {
                "integration-name": "Kubeflow Training Operator",
                "python-modules": ["airflow_provider_training.hooks.training"],
            },
        ],
        "triggers": [
            {
                "integration-name": "Kubeflow Training Operator",
                "python-modules": ["airflow_provider_training.triggers"],
            },
            {
                "integration-name": "KServe",
                "python-modules": ["airflow_provider_training.triggers.deploy"],
            },
        ],
        "connection-types": [
            {
                "connection-type": "modelkit_registry",
                "hook-class-name": "airflow_provider_training.hooks.registry.ModelKitRegistryHook",
                "hook-name": "ModelKit Registry (OCI / TCR)",
                "conn-fields": {
                    "plain_http": {
                        "label": "Plain HTTP",
                        "description": "Talk to the registry over http:// (local test registries only).",
                        "schema": {"type": ["boolean", "null"], "default": False},
                    },
                    "tls_verify": {
                        "label": "Verify TLS",
                        "description": "Verify the registry's TLS certificate.",
                        "schema": {"type": ["boolean", "null"], "default": True},
                    },
                    "ca_cert": {
                        "label": "CA certificate (PEM)",
                        "description": "Extra CA bundle for registries with a private CA.",
                        "schema": {"type": ["string", "null"], "format": "multiline"},
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "extra"],
                    "relabeling": {"host": "Registry", "login": "Username", "password": "Password or token"},
                    "placeholders": {
                        "host": "ccr.ccs.tencentyun.com or <instance>.tencentcloudcr.com",
                        "port": "443",
                    },
                },
            },
            {
                "connection-type": "modelkit_signing",
                "hook-class-name": "airflow_provider_training.hooks.signing.ModelKitSigningHook",
                "hook-name": "ModelKit Signing Key (cosign)",
                "conn-fields": {
                    "private_key": {
                        "label": "Private key (PEM)",
                        "description": "cosign.key (ENCRYPTED SIGSTORE PRIVATE KEY) or a PKCS #8 ECDSA P-256 key.",
                        "schema": {"type": ["string", "null"], "format": "multiline"},
                    },
                    "private_key_file": {
                        "label": "Private key file",
                        "description": "Path of the private key on the worker (instead of the PEM text).",
                        "schema": {"type": ["string", "null"]},
                    },
                    "public_key": {
                        "label": "Public key (PEM)",
                        "description": "cosign.pub, for verification (default: derived from the private key).",
                        "schema": {"type": ["string", "null"], "format": "multiline"},
                    },
                    "public_key_file": {
                        "label": "Public key file",
                        "description": "Path of cosign.pub on the worker.",
                        "schema": {"type": ["string", "null"]},
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "extra", "host", "port", "login"],
                    "relabeling": {"password": "Private key password"},
                },
            },
        ],
        "config": {
            "training": {
                "description": "Kubeflow training jobs, the embedded control plane and ModelKits.",
                "options": {
                    "kubernetes_conn_id": {
                        "description": (
                            "Default `kubernetes` connection for training jobs. Empty means the "
                            "embedded control plane on this machine, started on demand."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "kubernetes_default",
                        "default": "",
                    },
                    "embedded_home": {
                        "description": (
                            "Data directory of the embedded control plane. Empty means "
                            "$AIRFLOW_TRAINING_HOME, else ~/.airflow-training."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "/var/lib/airflow-training",
                        "default": "",
                    },
                    "embedded_runtime": {
                        "description": (
                            "How the embedded node runs pods when a task starts the control plane: `process` "
                            "(this machine's Python, the default) or `oci` (each container's image, pulled "
                            "from its registry and run with runc; needs Linux, root and runc, else pods run "
                            "as processes and the node says why). Empty means $AIRFLOW_TRAINING_RUNTIME, else "
                            "process. A pod's annotation training.airflow.apache.org/runtime overrides it."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "oci",
                        "default": "",
                    },
                    "embedded_authorization": {
                        "description": (
                            "Authorization of the embedded control plane when a task starts it: `rbac` "
                            "(as a cluster: pods may do what their service account is bound to, nothing "
                            "by default) or `permissive` (every valid token may do everything, as before "
                            "RBAC). Empty means $AIRFLOW_TRAINING_AUTHORIZATION, else rbac. The admin "
                            "kubeconfig the tasks use may do everything in both."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "permissive",
                        "default": "",
                    },
                    "defer_settle_seconds": {
                        "description": (
                            "A deferred task's trigger holds its event until this many seconds after "
                            "the task deferred: Airflow 3.2 to 3.4.0b2 can fail a task whose trigger "
                            "fires before the scheduler has seen the deferring worker exit "
                            "(apache/airflow#66374, #67287, #72716). Only jobs and rollouts that end "
                            "within this time are delayed. The default is per Airflow version: 10 "
                            "until a release tolerates every variant of the race, then 0."
                        ),
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "10",
                        "default": f"{compat.default_settle_seconds():g}",
                    },
                    "kit_binary": {
                        "description": (
                            "The `kit` executable used by ModelKit operators with engine='kit'. Empty "
                            "means $AIRFLOW_TRAINING_KIT_BINARY, else `kit` on PATH."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "/usr/local/bin/kit",
                        "default": "",
                    },
                    "kit_image": {
                        "description": (
                            "Container image of the packaging Job that ModelKit operators run on a cluster "
                            "(a pvc:// source with a kubernetes connection). Empty means the pinned "
                            "ghcr.io/kitops-ml/kitops release."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "ghcr.io/kitops-ml/kitops:v1.16.0",
                        "default": "",
                    },
                    "job_link_template": {
                        "description": (
                            "URL template for the job's extra link; fields {kind}, {plural}, {name}, "
                            "{namespace}, {uid}. Empty means the 'Training job' tab of the task instance in "
                            "Airflow's UI (the training cockpit)."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": (
                            "https://console.cloud.tencent.com/tke2/cluster/sub/list/kubeflow.org/"
                            "{plural}?clusterId=cls-xxxx&ns={namespace}"
                        ),
                        "default": "",
                    },
                },
            },
        },
    }
