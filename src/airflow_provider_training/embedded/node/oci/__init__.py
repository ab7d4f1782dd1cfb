"""The node's OCI runtime: real images instead of this machine's Python (opt-in).

``settings`` says which pods run as images (``[training] embedded_runtime = oci``, the
``AIRFLOW_TRAINING_RUNTIME`` variable, or a pod's ``training.airflow.apache.org/runtime``
annotation) and whether ``runc`` can run them here. ``references`` parses image names and applies
the node's image table (``<home>/image-table.yaml``: the DAGs' names mapped to a local registry).
``pull`` resolves a reference through the registry client of ``kitops`` (pull secrets, pull policy,
the kubelet's back-off; ``containerruntime``: which pods run as images, their pulls, reasons and events),
``imagestore`` keeps manifests, configs and unpacked layers content-addressed
under ``<home>/node/oci`` (``layers`` unpacks one layer, all or nothing), ``imageconfig`` turns an
image config and a container into argv, environment, working directory and user, ``bundle`` writes
a container's OCI bundle (``config.json``) and ``run`` is what the pod's supervisor starts for it:
a small stdlib-only program that mounts the container's writable layer and runs ``runc run``.
"""
