"""A Pod object -> what its supervisor runs (``spec.json``): argv, environment, working directory,
mounts and limits per container, resolved the way the kubelet resolves them.

Environment (``training-operator.md`` §7): the image's environment (``runtime``), then ``envFrom``
keys, then ``env`` in order with ``$(VAR)`` expansion of literal values against what came before;
``valueFrom`` (fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef) resolved, not expanded;
then ``command`` + ``args`` expanded against the final environment. A missing ConfigMap, Secret or
key that is not ``optional`` stops the container from being created, as on a cluster
(``CreateContainerConfigError`` / ``FailedMount``), and the pod waits until it appears.
"""

from __future__ import annotations

import base64
import math
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from airflow_provider_training.embedded import volumes as claims
from airflow_provider_training.embedded.node import inclusterconfig, isolation, orted, privileges, rundir, security
from airflow_provider_training.embedded.node import safepaths as safe
from airflow_provider_training.embedded.node.isolation import Sandbox
from airflow_provider_training.embedded.node.profiles import Runtime
from airflow_provider_training.embedded.paths import Home
from airflow_provider_training.embedded.store import Store
from airflow_provider_training.frameworks import expand_command, mpi, plugin_for_operator, pytorch, resolve_env
from airflow_provider_training.frameworks.labels import JOB_NAME, OPERATOR_NAME
from airflow_provider_training.specs.unstructured import ObjectMeta, Unstructured, controller_of

NODE_NAME = "embedded"
GPU = "nvidia.com/gpu"
_CONTAINER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_SUFFIXES: dict[str, int | Decimal] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
# Built-in init containers of the operator, done by the node without a process: init-pytorch waits
# for the master's name to resolve (here: for its address to be published once the master's
# container runs, ``resolution_wait``); kubectl-delivery copies kubectl for MPI, which the node agent
# delivers itself (``podexec``).
BUILTIN_INIT = {pytorch.INIT_CONTAINER_NAME, mpi.KUBECTL_DELIVERY_NAME}


class PodConfigError(Exception):
    """The pod cannot start yet; ``reason`` is the kubelet's (CreateContainerConfigError, FailedMount…)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


_QUANTITY = re.compile(r"([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?")


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes quantity (``2``, ``500m``, ``4Gi``, ``1e3``) as a number."""
    match = _QUANTITY.fullmatch(str(value).strip())
    if match is None:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 2, 500m, 4Gi)")
    number, suffix = match.groups()
    return Decimal(number) * Decimal(_SUFFIXES[suffix]) if suffix else Decimal(number)


def resources(container: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    res = container.get("resources") or {}
    limits = res.get("limits") or {}
    requests = dict(res.get("requests") or {})
    for key, value in limits.items():
        requests.setdefault(key, value)  # a limit without a request requests the same
    return requests, limits


def gpus_requested(pod: Unstructured) -> int:
    total = 0
    for c in pod.get("spec", {}).get("containers") or []:
        requests, _ = resources(c)
        if GPU in requests:
            total += int(parse_quantity(requests[GPU]))
    return total


@dataclass
class Context:
    store: Store
    home: Home
    runtime: Runtime
    node_dir: Path
    isolation: str
    pod_ip: str
    sandbox: Sandbox = field(default_factory=Sandbox)


def _lookup(ctx: Context, kind: str, namespace: str, name: str) -> Unstructured | None:
    return ctx.store.get(f"core/{kind}s", namespace, name)


def _data(obj: Unstructured, kind: str) -> dict[str, str]:
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        raise PodConfigError("CreateContainerConfigError", f"{_title(kind)} {_ref(obj)}: data is not a map")
    if kind == "secret":
        out = {}
        for key, value in data.items():
            try:
                out[str(key)] = base64.b64decode(str(value), validate=True).decode("utf-8", "replace")
            except ValueError:
                raise PodConfigError(
                    "CreateContainerConfigError",
                    f"{_title(kind)} {_ref(obj)}: the value of key {key} is not base64 "
                    "(put plain text under stringData, or base64-encode it under data)",
                ) from None
        string_data = obj.get("stringData") or {}
        if isinstance(string_data, dict):
            out.update({str(k): str(v) for k, v in string_data.items()})
        return out
    return {str(k): str(v) for k, v in data.items()}


def _title(kind: str) -> str:
    return "ConfigMap" if kind == "configmap" else "Secret"


def _ref(obj: Unstructured) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _field(pod: Unstructured, path: str, pod_ip: str) -> str:
    meta = pod.get("metadata", {})
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": NODE_NAME,
        "spec.serviceAccountName": pod.get("spec", {}).get("serviceAccountName") or "default",
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": "127.0.0.1",
        "status.hostIPs": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path])
    match = re.match(r"^metadata\.(labels|annotations)\['(.+)'\]$", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    raise PodConfigError("CreateContainerConfigError", f"unsupported fieldRef fieldPath {path!r}")


def _resource_field(container: dict[str, Any], ref: dict[str, Any]) -> str:
    requests, limits = resources(container)
    kind, _, name = str(ref.get("resource", "")).partition(".")
    table = limits if kind == "limits" else requests
    if name not in table:
        if name == "cpu":
            return str(os.cpu_count() or 1) if kind == "limits" else "0"
        if name == "memory" and kind == "limits":
            return str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        return "0"
    divisor = parse_quantity(ref.get("divisor") or 1)
    return str(math.ceil(parse_quantity(table[name]) / divisor))


def _key_ref(ctx: Context, namespace: str, ref: dict[str, Any], kind: str) -> str | None:
    name, key = ref.get("name", ""), ref.get("key", "")
    obj = _lookup(ctx, kind, namespace, name)
    if obj is None:
        if ref.get("optional"):
            return None
        raise PodConfigError("CreateContainerConfigError", f'{kind} "{name}" not found')
    data = _data(obj, kind)
    if key not in data:
        if ref.get("optional"):
            return None
        raise PodConfigError(
            "CreateContainerConfigError", f"couldn't find key {key} in {kind.capitalize()} {namespace}/{name}"
        )
    return data[key]


def environment(ctx: Context, pod: Unstructured, container: dict[str, Any]) -> dict[str, str]:
    namespace = pod["metadata"]["namespace"]
    base: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix") or ""
        for kind, field_name in (("configmap", "configMapRef"), ("secret", "secretRef")):
            ref = source.get(field_name)
            if ref is None:
                continue
            obj = _lookup(ctx, kind, namespace, ref.get("name", ""))
            if obj is None:
                if ref.get("optional"):
                    continue
                raise PodConfigError("CreateContainerConfigError", f'{kind} "{ref.get("name")}" not found')
            for key, text in _data(obj, kind).items():
                if _ENV_NAME.match(prefix + key):
                    base[prefix + key] = text
    entries: list[tuple[str, str | None, bool]] = []
    for var in container.get("env") or []:
        source = var.get("valueFrom")
        if source is None:
            entries.append((var["name"], var.get("value"), True))
            continue
        value: str | None
        if "fieldRef" in source:
            value = _field(pod, source["fieldRef"].get("fieldPath", ""), ctx.pod_ip)
        elif "resourceFieldRef" in source:
            value = _resource_field(container, source["resourceFieldRef"])
        elif "configMapKeyRef" in source:
            value = _key_ref(ctx, namespace, source["configMapKeyRef"], "configmap")
        elif "secretKeyRef" in source:
            value = _key_ref(ctx, namespace, source["secretKeyRef"], "secret")
        else:
            raise PodConfigError("CreateContainerConfigError", f"env {var['name']}: unsupported valueFrom {source}")
        if value is not None:
            entries.append((var["name"], value, False))
    return resolve_env(base, entries)


# -- volumes ---------------------------------------------------------------------------------
def _write_items(directory: Path, data: dict[str, str], spec: dict[str, Any]) -> None:
    """Write a configMap / secret volume's files into ``directory`` in place: the directory itself is
    kept (a running container's view binds it), each file is replaced atomically, and files of keys
    no longer chosen are removed. Used at pod start and when the object changes while the pod runs."""
    directory.mkdir(parents=True, exist_ok=True)
    default_mode = int(spec.get("defaultMode", 0o644))
    items = spec.get("items")
    chosen = (
        [(i["key"], i.get("path", i["key"]), int(i.get("mode", default_mode))) for i in items]
        if items
        else [(k, k, default_mode) for k in data]
    )
    wanted: set[Path] = set()
    directory = directory.resolve()
    for key, rel, mode in chosen:
        if key not in data:
            continue
        try:
            path = safe.inside(directory, rel, "items[].path")
        except safe.PathEscape as exc:
            raise PodConfigError("FailedMount", f"MountVolume.SetUp failed: {exc}") from None
        path.parent.mkdir(parents=True, exist_ok=True)
        # Keys may be 253 characters, so the temporary name must not grow with the key; keys never
        # start with "..", as with the kubelet's own "..data" files.
        tmp = path.with_name("..tmp")
        tmp.write_text(data[key])
        tmp.chmod(mode)
        os.replace(tmp, path)
        wanted.update([path, *path.parents])
    for entry in sorted(directory.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if entry not in wanted:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def refresh_config_volumes(ctx: Context, pod: Unstructured, pod_dir: Path, kind: str, name: str) -> list[str]:
    """Rewrite the pod's volumes that show ConfigMap / Secret ``name`` (``kind`` "configmap" or
    "secret") from its current data, as the kubelet's periodic sync does. Returns the volumes updated."""
    updated = []
    for volume in pod.get("spec", {}).get("volumes") or []:
        spec = volume.get("configMap") if kind == "configmap" else volume.get("secret")
        if spec is None or (spec.get("name") or spec.get("secretName")) != name:
            continue
        local = pod_dir / "volumes" / volume["name"]
        if not local.is_dir():
            continue
        obj = _lookup(ctx, kind, pod["metadata"]["namespace"], name)
        _write_items(local, _data(obj, kind) if obj else {}, spec)
        fs_group = ((pod.get("spec") or {}).get("securityContext") or {}).get("fsGroup")
        if isinstance(fs_group, int) and privileges.can_switch_user():
            security.set_volume_ownership(local, fs_group, read_only=True)
        updated.append(volume["name"])
    return updated


def volume_dirs(
    ctx: Context, pod: Unstructured, pod_dir: Path, fs: security.PodSecurity | None = None
) -> dict[str, Path]:
    namespace = pod["metadata"]["namespace"]
    fs = fs or security.PodSecurity()
    out: dict[str, Path] = {}
    owned: list[tuple[Path, bool]] = []  # (directory, read-only): what fsGroup applies to, as the kubelet's
    for volume in pod.get("spec", {}).get("volumes") or []:
        name = volume["name"]
        try:
            local = safe.inside(pod_dir / "volumes", name, "volume name")
        except safe.PathEscape as exc:
            raise PodConfigError("FailedMount", f"MountVolume.SetUp failed: {exc}") from None
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            try:  # the claim directory stays under volumes/pvc/<namespace>/
                path = safe.inside(ctx.home.claim_dir(namespace, "x").parent, claim, "claimName")
                if "/" in claim:
                    raise safe.PathEscape(f"claimName {claim!r} must be a name, not a path")
            except safe.PathEscape as exc:
                raise PodConfigError("FailedMount", f'MountVolume.SetUp failed for volume "{name}" : {exc}') from None
            claims.ensure_claims(ctx.store, ctx.home, {"metadata": pod["metadata"], "spec": {"volumes": [volume]}})
            claims.make_claim_dir(path)
            out[name] = path
            owned.append((path, False))
        elif "emptyDir" in volume:
            if ((volume.get("emptyDir") or {}).get("medium") or "") != "Memory":
                # what a pod writes there is the user's (outputs, checkpoints): on disk, not in the
                # runtime directory, which may be in memory (``rundir``)
                local = safe.inside(rundir.empty_dir(ctx.node_dir, pod["metadata"]["uid"]), name, "volume name")
            if not local.is_dir():
                local.mkdir(parents=True, exist_ok=True)
                local.chmod(0o777)  # the kubelet's emptyDir mode: any user of the pod writes there
            out[name] = local
            owned.append((local, False))
        elif "hostPath" in volume:
            out[name] = _host_path(ctx, name, volume["hostPath"])
        elif "projected" in volume:  # the service-account token, ca.crt and namespace (inclusterconfig)
            try:
                inclusterconfig.write_projected(ctx.store, ctx.home, pod, volume, local, fs.fs_user, fs.fs_group)
            except inclusterconfig.ProjectionError as exc:
                raise PodConfigError("FailedMount", f'MountVolume.SetUp failed for volume "{name}" : {exc}') from None
            out[name] = local
            owned.append((local, True))
        elif "configMap" in volume or "secret" in volume:
            kind = "configmap" if "configMap" in volume else "secret"
            spec = volume.get("configMap") or volume.get("secret") or {}
            obj_name = spec.get("name") or spec.get("secretName") or ""
            obj = _lookup(ctx, kind, namespace, obj_name)
            if obj is None and not spec.get("optional"):
                raise PodConfigError(
                    "FailedMount", f'MountVolume.SetUp failed for volume "{name}" : {kind} "{obj_name}" not found'
                )
            try:
                _write_items(local, _data(obj, kind) if obj else {}, spec)
            except OSError as exc:  # a key the file system cannot name (longer than 255 bytes, …)
                raise PodConfigError(
                    "FailedMount",
                    f'MountVolume.SetUp failed for volume "{name}" : cannot write {kind} "{obj_name}": '
                    f"{exc.strerror or exc}: {Path(str(exc.filename or '')).name}",
                ) from None
            out[name] = local
            owned.append((local, True))
        else:
            raise PodConfigError(
                "FailedMount",
                f'volume "{name}": only persistentVolumeClaim, emptyDir, hostPath, configMap and secret volumes '
                "are supported by the embedded control plane",
            )
    if fs.fs_group is not None and privileges.can_switch_user():
        for directory, read_only in owned:
            try:
                security.set_volume_ownership(directory, fs.fs_group, read_only, fs.fs_group_policy)
            except OSError as exc:
                raise PodConfigError(
                    "FailedMount",
                    f"MountVolume.SetUp failed: cannot apply fsGroup {fs.fs_group}: {exc.strerror or exc}",
                ) from None
    return out


def _host_path(ctx: Context, name: str, spec: dict[str, Any]) -> Path:
    path = Path(spec["path"])
    if not path.is_absolute() or "\x00" in str(path):
        raise PodConfigError(
            "FailedMount",
            f'MountVolume.SetUp failed for volume "{name}" : hostPath {str(path)!r} is not absolute',
        )
    real = os.path.realpath(path)
    for hidden in ctx.sandbox.hide:
        hidden = os.path.realpath(hidden)
        if real == hidden or real.startswith(hidden.rstrip("/") + "/"):
            # a directory above it is fine: the view covers the data directory inside it too
            raise PodConfigError(
                "FailedMount",
                f'MountVolume.SetUp failed for volume "{name}" : hostPath {str(path)!r} is inside the control '
                "plane's data directory, which no pod may see; use a persistentVolumeClaim or another host path",
            )
    kind = spec.get("type") or ""
    if kind == "DirectoryOrCreate":
        path.mkdir(parents=True, exist_ok=True)
    elif kind == "FileOrCreate" and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    elif kind in ("Directory", "File") and not path.exists():
        raise PodConfigError(
            "FailedMount",
            f'MountVolume.SetUp failed for volume "{name}" : hostPath type check failed: {path} is not a {kind.lower()}',
        )
    return path


def mounts(
    container: dict[str, Any], dirs: dict[str, Path], read_only: set[str], mode: str = isolation.LINKS
) -> list[isolation.Mount]:
    """The container's mounts. A ``subPath`` is checked here against what exists now, and, with
    ``namespace`` isolation, opened again by the supervisor at each start (after the init containers
    ran: one may have replaced a directory with a link since); with ``links`` it is resolved here."""
    out = []
    for mount in container.get("volumeMounts") or []:
        name = mount["name"]
        if name not in dirs:
            raise PodConfigError("FailedMount", f'volumeMount "{name}" does not name a volume of the pod')
        source = dirs[name]
        sub_path = ""
        if mount.get("subPath"):
            try:
                resolved = safe.inside(dirs[name], mount["subPath"], "subPath")
            except safe.PathEscape as exc:
                raise PodConfigError(
                    "CreateContainerConfigError", f'failed to prepare subPath for volumeMount "{name}": {exc}'
                ) from None
            if mode == isolation.NAMESPACE:
                sub_path = str(mount["subPath"])
            else:
                source = resolved
                if not source.exists():
                    source.mkdir(parents=True)
        out.append(
            isolation.Mount(
                str(source), mount["mountPath"], bool(mount.get("readOnly")) or name in read_only, sub_path, name
            )
        )
    return out


# -- the whole pod ---------------------------------------------------------------------------
def build(
    ctx: Context,
    pod: Unstructured,
    pod_dir: Path,
    gpu_ids: list[str],
    node_has_gpus: bool,
    images: dict[str, Any] | None = None,
) -> Unstructured:
    """``images``: for a pod that runs as images (``oci.containerruntime``), each container's
    ``oci.imageconfig.ImageConfig``: its environment, argv, working directory and user come from it."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    try:
        fs = security.pod_security(pod)
    except security.SecurityContextError as exc:
        raise PodConfigError("CreateContainerConfigError", str(exc)) from None
    warnings = list(fs.warnings)
    dirs = volume_dirs(ctx, pod, pod_dir, fs)
    read_only = {v["name"] for v in spec.get("volumes") or [] if "configMap" in v or "secret" in v or "projected" in v}
    owner_plugin = plugin_for_operator((meta.get("labels") or {}).get(OPERATOR_NAME))
    kind_env = dict(owner_plugin.local_process_env) if owner_plugin is not None else {}
    for init_container in spec.get("initContainers") or []:
        if isinstance(init_container, dict) and init_container.get("name") == mpi.KUBECTL_DELIVERY_NAME:
            target = kubectl_target(init_container, dirs)
            if target is not None:
                deliver_kubectl(target, ctx.node_dir, meta["namespace"])
    gpu_left = list(gpu_ids)

    def container_spec(container: dict[str, Any], init: bool, where: str) -> dict[str, Any]:
        name = container["name"]
        if not isinstance(name, str) or not _CONTAINER_NAME.fullmatch(name):
            # it names the container's log directory and root: never a path
            raise PodConfigError("CreateContainerConfigError", f"invalid container name {str(name)[:80]!r}")
        if init and name in BUILTIN_INIT:
            # Done by the supervisor with no process (``builtin``): no command, environment or view,
            # and no memory cgroup for its 20Mi limit (joining one makes the kernel wait for an RCU
            # grace period while it holds back every fork and exit on the machine: ~20 ms a pod).
            if name == pytorch.INIT_CONTAINER_NAME:
                wait = resolution_wait(ctx.node_dir, container)
            else:
                wait = workers_wait(ctx.node_dir, dirs.get(mpi.CONFIG_VOLUME), ctx.pod_ip)
            return {"name": name, "image": container.get("image", ""), "builtin": True, "waitFor": wait, "mounts": []}
        image = images.get(name) if images is not None else None
        if image is not None:
            container = image.with_user(pod, container)  # the image's user, where the spec sets none
        profile = ctx.runtime.profile(container.get("image"))
        env = image.environment() if image is not None else profile.environment(ctx.runtime.base_path)
        env["HOSTNAME"] = (pod.get("spec") or {}).get("hostname") or meta["name"]
        env.update(inclusterconfig.service_env(ctx.home))
        env.update(kind_env)
        env.update(environment(ctx, pod, container))
        if mpi.RSH_AGENT_ENV in env and MPI_TMPDIR_ENV not in env:
            # A cluster's pods have a /tmp each; these share the node's. Open MPI names its session
            # tree after mpirun's job family (16 bits of its pid), so two launchers can meet in one
            # tree, one removing it while the other's orted fills it ("mkdir ... File exists"). A
            # base of the launcher's own keeps them apart; mpirun passes it on to each orted.
            env[MPI_TMPDIR_ENV] = f"/tmp/ompi-{meta['uid']}"
        requests, limits = resources(container)
        if not init and GPU in requests:
            n = int(parse_quantity(requests[GPU]))
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_left[:n])
            del gpu_left[:n]
        elif node_has_gpus and "CUDA_VISIBLE_DEVICES" not in env:
            env["CUDA_VISIBLE_DEVICES"] = ""
        if image is not None:
            argv = image.argv(container, env)
        else:
            argv = expand_command(container.get("command"), env) + expand_command(container.get("args"), env)
        if not argv:
            raise PodConfigError(
                "CreateContainerConfigError",
                f"container {name} has no command: the embedded control plane runs no image entrypoints, "
                "so set command (and args)",
            )
        memory_limit = int(parse_quantity(limits["memory"])) if "memory" in limits else None
        try:
            identity, not_enforced = security.identity(pod, container, where)
        except security.SecurityContextError as exc:
            raise PodConfigError("CreateContainerConfigError", str(exc)) from None
        warnings.extend(not_enforced)
        rootfs = pod_dir / f"rootfs-{name}"
        rootfs.mkdir(parents=True, exist_ok=True)
        return {
            "name": name,
            "image": container.get("image", ""),
            "argv": argv,
            "env": env,
            "workdir": image.working_dir(container) if image is not None else ctx.runtime.working_dir(container, pod),
            "mounts": [
                m.to_dict()
                for m in mounts(container, dirs, read_only, ctx.isolation)
                if inclusterconfig.mountable(m, ctx.isolation)
            ],
            "memoryLimit": memory_limit,
            "rootfs": str(rootfs),
            "identity": identity.to_dict(),
        }

    inits = [container_spec(c, True, f"initContainers[{i}]") for i, c in enumerate(spec.get("initContainers") or [])]
    mains = [container_spec(c, False, f"containers[{i}]") for i, c in enumerate(spec.get("containers") or [])]
    return {
        "namespace": meta["namespace"],
        "pod": meta["name"],
        "uid": meta["uid"],
        "job": job_of(meta),
        "execBroker": launches_mpi(spec),
        "podIP": ctx.pod_ip,
        "isolation": ctx.isolation,
        "sandbox": ctx.sandbox.to_dict(),
        "initContainers": inits,
        "containers": mains,
        "restartPolicy": spec.get("restartPolicy") or "Always",
        "gracePeriod": float(spec.get("terminationGracePeriodSeconds", 30)),
        "warnings": warnings,
    }


def _controller_uid(meta: ObjectMeta) -> str:
    """The uid of the object that controls the pod (its job), or ""."""
    ref = controller_of({"metadata": meta})
    return str(ref.get("uid") or "") if ref is not None else ""


_LOOKUP = re.compile(r"nslookup\s+([A-Za-z0-9.-]+)")


def endpoints_dir(node_dir: Path) -> Path:
    """Where the node agent publishes the address of each pod whose containers have started (a
    headless Service's name resolves once its pod is up): one empty file per address."""
    return node_dir / "endpoints"


def resolution_wait(node_dir: Path, container: dict[str, Any]) -> dict[str, Any]:
    """What ``init-pytorch`` waits for: the name it looks up (the master's address here) published
    by the agent, for as long as its ``nslookup`` tries would last (2 s apart)."""
    text = " ".join(str(part) for part in (container.get("command") or []) + (container.get("args") or []))
    match = _LOOKUP.search(text)
    if match is None:
        return {}
    name = match.group(1)
    return {
        "name": name,
        "path": str(endpoints_dir(node_dir) / name),
        "timeout": float(pytorch.INIT_CONTAINER_MAX_TRIES * 2),
    }


def workers_wait(node_dir: Path, config: Path | None, own_address: str) -> dict[str, Any]:
    """What ``kubectl-delivery`` waits for, as upstream's does before the launcher's mpirun starts:
    every pod of the hostfile running (their addresses published); without it, mpirun could exec
    into a worker the node had not started yet."""
    try:
        lines = (config / mpi.HOSTFILE).read_text().splitlines() if config is not None else []
    except OSError:
        return {}
    hosts = [line.split()[0] for line in lines if line.strip() and line.split()[0] != own_address]
    if not hosts:
        return {}
    return {
        "name": "the workers",
        "paths": [str(endpoints_dir(node_dir) / host) for host in hosts],
        "timeout": None,
        "waiting": f"waiting for the pods of the hostfile to run: {', '.join(hosts)}",
        "ready": "the pods of the hostfile run",
    }


def kubectl_target(container: dict[str, Any], dirs: dict[str, Path]) -> Path | None:
    """The directory of the volume a kubectl-delivery init container writes to (at ``TARGET_DIR``)."""
    env = {e.get("name"): e.get("value") for e in container.get("env") or [] if isinstance(e, dict)}
    target = env.get("TARGET_DIR") or mpi.KUBECTL_MOUNT_PATH
    for mount in container.get("volumeMounts") or []:
        if isinstance(mount, dict) and mount.get("mountPath") == target and mount.get("name") in dirs:
            return dirs[mount["name"]]
    return None


def deliver_kubectl(directory: Path, node_dir: Path, namespace: str) -> None:
    """What the ``kubectl-delivery`` image does (an MPIJob launcher's init container): a ``kubectl``
    whose ``exec`` reaches the pods of this node (``podexec``; from inside a view, through the node
    agent: ``execbroker``)."""
    import sys

    entry = Path(__file__).with_name("entry.py")
    # the node's default for how long an orted may take to call back; the launcher's env wins
    default = os.environ.get(orted.TIMEOUT_ENV, "")
    timeout = f': "${{{orted.TIMEOUT_ENV}:={shlex.quote(default)}}}"; export {orted.TIMEOUT_ENV}\n' if default else ""
    script = (
        "#!/bin/sh\n# kubectl exec for the embedded node (delivered by the node agent)\n"
        f'{timeout}exec "{sys.executable}" -I -S "{entry}" exec "{node_dir}" "{namespace}" "$@"\n'
    )
    target = directory / "kubectl"
    target.write_text(script)
    target.chmod(0o755)


MPI_TMPDIR_ENV = "OMPI_MCA_orte_tmpdir_base"


# the labels that name the job a pod belongs to (a JobSet's, a training job's), most specific last
JOB_LABELS = ("jobset.sigs.k8s.io/jobset-name", JOB_NAME)


def job_of(meta: ObjectMeta) -> str:
    """Which job the pod belongs to, for the node's exec (an MPI launcher reaches its own job's pods)."""
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    assert isinstance(labels, dict)
    for label in JOB_LABELS:
        if labels.get(label):
            return f"{label}={labels[label]}"
    owner = _controller_uid(meta)
    return f"uid={owner}" if owner else ""


def launches_mpi(spec: dict[str, Any]) -> bool:
    """An MPI launcher: it execs into other pods (``kubectl-delivery``, or an rsh agent in its env)."""
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        if not isinstance(container, dict):
            continue
        if container.get("name") == mpi.KUBECTL_DELIVERY_NAME:
            return True
        if any(isinstance(e, dict) and e.get("name") == mpi.RSH_AGENT_ENV for e in container.get("env") or []):
            return True
    return False
