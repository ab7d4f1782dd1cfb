"""create / get / list / replace / patch / delete of stored resources, with the semantics of a real
API server: namespaces must exist, status only through the status subresource, generation bumps on
spec changes, optimistic concurrency, dry runs, admission of training jobs, garbage collection."""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
import json
import re
import secrets
import uuid
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from airflow_provider_training.embedded import jsoncodec, serviceaccount, volumes
from airflow_provider_training.embedded.apiserver import (
    batchjobs,
    builtin,
    capacity,
    errors,
    limits,
    managed,
    offload,
    rbacadmission,
    structure,
)
from airflow_provider_training.embedded.apiserver.context import ServerContext
from airflow_provider_training.embedded.apiserver.defaulting import canonical_form
from airflow_provider_training.embedded.apiserver.http import (
    Target,
    decode_body,
    json_response,
    read_raw,
    wants_table,
)
from airflow_provider_training.embedded.apiserver.patch import APPLY_PATCH, PatchError, apply_patch
from airflow_provider_training.embedded.apiserver.podupdate import validate_pod_update
from airflow_provider_training.embedded.apiserver.selectors import (
    SelectorError,
    equality_terms,
    field_matcher,
    label_matcher,
    parse_field_selector,
    parse_label_selector,
)
from airflow_provider_training.embedded.apiserver.tables import to_table
from airflow_provider_training.embedded.apiserver.trainer import admit_trainer_object, check_trainer_status
from airflow_provider_training.embedded.apiserver.trainingjobs import admit_training_job, field_validation_mode
from airflow_provider_training.embedded.resources import BY_KEY, CRDS, NAMESPACES, PODS, PVCS, ResourceType
from airflow_provider_training.embedded.store import (
    AlreadyExistsError,
    ConflictError,
    ListResult,
    NotFoundError,
    RawListResult,
    now_timestamp,
)
from airflow_provider_training.specs.crds import all_crds
from airflow_provider_training.specs.trainer.crds import all_crds as trainer_crds
from airflow_provider_training.specs.unstructured import Unstructured

SECRETS_KEY = "core/secrets"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
BATCH_JOBS = "batch/jobs"


# -- helpers -----------------------------------------------------------------------------------
def _check_type(rt: ResourceType, obj: Any) -> Unstructured:
    if not isinstance(obj, dict):
        raise errors.bad_request(f"the body must be a JSON object describing a {rt.kind}")
    kind, api_version = obj.setdefault("kind", rt.kind), obj.setdefault("apiVersion", rt.api_version)
    if kind != rt.kind or api_version != rt.api_version:
        raise errors.bad_request(
            f"the object is a {kind} ({api_version}) but this URL serves {rt.kind} ({rt.api_version}): "
            f"send it to the {kind}'s own URL"
        )
    if not isinstance(obj.setdefault("metadata", {}), dict):
        raise errors.bad_request("metadata must be an object")
    return obj


def _check_name(rt: ResourceType, name: str) -> None:
    check = builtin.path_segment_name if rt.group == builtin.RBAC_GROUP else builtin.subdomain
    issues = check("metadata.name", name)
    if issues:
        raise errors.invalid(rt, name, issues)


def _require_namespace(ctx: ServerContext, namespace: str) -> None:
    if ctx.store.get(NAMESPACES.key, "", namespace) is None:
        raise errors.namespace_not_found(namespace)


def _get(ctx: ServerContext, target: Target) -> Unstructured:
    assert target.name is not None
    obj = ctx.store.get(target.rt.key, target.store_namespace, target.name)
    if obj is None:
        raise errors.not_found(target.rt, target.name)
    return obj


def _single(
    request: Request,
    rt: ResourceType,
    obj: Unstructured,
    code: int = 200,
    warnings: list[str] | None = None,
) -> Response:
    if wants_table(request):
        table = to_table(
            rt,
            [obj],
            {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
            request.query_params.get("includeObject", "Metadata"),
        )
        return json_response(table, code, warnings)
    return json_response(obj, code, warnings)


def _dry_run(request: Request) -> bool:
    values = request.query_params.getlist("dryRun")
    if any(v != "All" for v in values):
        raise errors.bad_request(f'dryRun must be "All" (got {values})')
    return bool(values)


def _served_crds() -> list[Unstructured]:
    items = []
    for definition in [*all_crds(), *trainer_crds()]:
        item = copy.deepcopy(definition)
        meta = item.setdefault("metadata", {})
        meta.setdefault("uid", f"crd-{meta['name']}")
        meta.setdefault("creationTimestamp", "2024-01-01T00:00:00Z")
        meta.setdefault("resourceVersion", "1")
        meta.setdefault("generation", 1)
        item.setdefault(
            "status",
            {
                "acceptedNames": item["spec"]["names"],
                "storedVersions": ["v1"],
                "conditions": [{"type": "Established", "status": "True"}],
            },
        )
        items.append(item)
    return items


def _prepare_new(ctx: ServerContext, rt: ResourceType, obj: Unstructured, automount: bool = True) -> None:
    """Server-set fields of a new object (``automount``: a pod's service-account token is mounted)."""
    if rt.has_status:
        obj.pop("status", None)
    if rt is PODS:
        obj["status"] = {}
    elif rt is NAMESPACES:
        obj["status"] = {"phase": "Active"}
    elif rt is PVCS:
        volumes.bind(ctx.home, obj)
    _fold_string_data(rt, obj)
    canonical_form(rt, obj, new=True, automount=automount)


def _fold_string_data(rt: ResourceType, obj: Unstructured) -> None:
    """A Secret's ``stringData`` is write-only: kube-apiserver merges it into ``data`` (base64) and
    never returns it, so a secret written as text is not read back in clear."""
    if rt.key != SECRETS_KEY or not isinstance(obj.get("stringData"), dict):
        return
    current = obj.get("data")
    data: dict[str, Any] = current if isinstance(current, dict) else {}
    for key, value in obj.pop("stringData").items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    obj["data"] = data


# -- verbs -------------------------------------------------------------------------------------
# Each verb reads its request on the event loop and does the rest on a worker thread (``offload``).
async def create(request: Request, ctx: ServerContext, target: Target) -> Response:
    raw = await read_raw(request, ctx.settings.max_body_bytes)
    return await offload.run(lambda: create_object(request, ctx, target, decode_body(request, raw)))


def create_object(
    request: Request, ctx: ServerContext, target: Target, body: Any, record_manager: bool = True
) -> Response:
    rt = target.rt
    obj = _check_type(rt, body)
    obj, decode_warnings = builtin.admit(rt, obj, field_validation_mode(request.query_params.get("fieldValidation")))
    meta = obj["metadata"]
    if rt.namespaced:
        namespace = target.namespace or meta.get("namespace") or "default"
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request(
                f"the namespace of the provided object ({meta['namespace']}) does not match the namespace "
                f"sent on the request ({namespace})"
            )
        meta["namespace"] = namespace
        _require_namespace(ctx, namespace)
    else:
        meta.pop("namespace", None)
    if not meta.get("name"):
        prefix = meta.get("generateName")
        if not prefix:
            raise errors.invalid(rt, "", [("metadata.name", "Required value: name or generateName is required")])
        meta["name"] = prefix + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
    _check_name(rt, meta["name"])
    builtin.validate(rt, obj)
    automount = rbacadmission.admit(request, ctx, rt, obj, None)
    _prepare_new(ctx, rt, obj, automount)
    warnings: list[str] = list(decode_warnings)
    if rt.training_job is not None:
        mode = field_validation_mode(request.query_params.get("fieldValidation"))
        obj, job_warnings = admit_training_job(rt, obj, None, mode)
        warnings += job_warnings
    elif rt.trainer is not None:
        mode = field_validation_mode(request.query_params.get("fieldValidation"))
        obj, job_warnings = admit_trainer_object(ctx.store, rt, obj, None, mode)
        warnings += job_warnings
    capacity.admit(ctx.store, rt, obj, None)
    if record_manager:
        managed.record_update(None, obj, _manager(request), rt.api_version)
    uid = None
    if rt.key == BATCH_JOBS:
        uid = str(uuid.uuid4())
        batchjobs.admit_new(rt, obj, uid)
    if _dry_run(request):
        if ctx.store.get(rt.key, meta.get("namespace", ""), meta["name"]) is not None:
            raise errors.already_exists(rt, meta["name"])
        obj["metadata"].update(creationTimestamp=now_timestamp(), generation=1)
        return _single(request, rt, obj, 201, warnings)
    try:
        created = ctx.store.create(rt.key, obj, uid=uid, copy=False)  # (built for this request alone)
    except AlreadyExistsError:
        raise errors.already_exists(rt, meta["name"]) from None
    if rt is PODS:
        volumes.ensure_claims(ctx.store, ctx.home, created)
    elif rt is NAMESPACES:  # at once, so a pod created right after the namespace finds its account
        serviceaccount.ensure_default(ctx.store, meta["name"])
    return _single(request, rt, created, 201, warnings)


# Reads answered with the stored JSON as it is are served on the event loop itself: a few
# milliseconds even for the largest object, and a worker thread's answer waits for the loop's next
# round (behind whatever the controllers do in this one). A list of more items goes to a thread.
INLINE_LIST_ITEMS = 500


async def get(request: Request, ctx: ServerContext, target: Target) -> Response:
    if target.rt is not CRDS and not wants_table(request):
        # the stored JSON as it is: a large object is not decoded only to be encoded again
        assert target.name is not None
        raw = ctx.store.get_raw(target.rt.key, target.store_namespace, target.name)
        if raw is None:
            raise errors.not_found(target.rt, target.name)
        return Response(raw.encode("utf-8"), media_type="application/json")
    return await offload.run(_get_response, request, ctx, target)


def _get_response(request: Request, ctx: ServerContext, target: Target) -> Response:
    if target.rt is CRDS:
        assert target.name is not None
        for item in _served_crds():
            if item["metadata"]["name"] == target.name:
                return _single(request, target.rt, item)
        raise errors.not_found(target.rt, target.name)
    return _single(request, target.rt, _get(ctx, target))


def _list_query(request: Request, target: Target) -> dict[str, Any]:
    """The store's list arguments of a list request (its selectors, page and continue token)."""
    rt, query = target.rt, request.query_params
    try:
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(query.get("fieldSelector"), rt.allows_field)
    except SelectorError as exc:
        raise errors.bad_request(str(exc)) from None
    limit = limits.non_negative(query.get("limit"), "limit")
    limits.resource_version(query.get("resourceVersion"))
    after: tuple[str, str] | None = None
    if token := query.get("continue"):
        try:
            ns, name = json.loads(base64.urlsafe_b64decode(token.encode()))
            after = (str(ns), str(name))
        except (ValueError, binascii.Error, TypeError):
            raise errors.bad_request("continue key is not valid: list again without it") from None
    return {
        "label_equals": equality_terms(labels),
        "label_filter": label_matcher(labels) if labels else None,
        "object_filter": field_matcher(fields) if fields else None,
        "after": after,
        "limit": limit or None,
    }


def list_objects(request: Request, ctx: ServerContext, target: Target) -> ListResult:
    query = _list_query(request, target)
    if target.rt is CRDS:
        labels, fields = query["label_filter"], query["object_filter"]
        items = [
            i
            for i in _served_crds()
            if (labels is None or labels(i["metadata"].get("labels") or {})) and (fields is None or fields(i))
        ]
        return ListResult(items, ctx.store.resource_version, None)
    return ctx.store.list(target.rt.key, target.namespace, **query)


def list_body(rt: ResourceType, result: ListResult) -> tuple[dict[str, Any], dict[str, Any]]:
    list_meta: dict[str, Any] = {"resourceVersion": str(result.resource_version)}
    if result.next_key is not None:
        list_meta["continue"] = base64.urlsafe_b64encode(json.dumps(list(result.next_key)).encode()).decode()
    body = {
        "kind": f"{rt.kind}List",
        "apiVersion": rt.api_version,
        "metadata": list_meta,
        "items": result.items,
    }
    return body, list_meta


async def list_(request: Request, ctx: ServerContext, target: Target) -> Response:
    if not wants_table(request) and target.rt is not CRDS:
        query = _list_query(request, target)
        limit = query["limit"]
        if query["object_filter"] is None and (limit is None or limit <= INLINE_LIST_ITEMS):
            raw = ctx.store.list_raw(target.rt.key, target.namespace, **{**query, "limit": limit or INLINE_LIST_ITEMS})
            if limit is not None or raw.next_key is None:
                return _raw_list(target, raw)
    return await offload.run(_list_response, request, ctx, target)


def _raw_list(target: Target, raw: RawListResult) -> Response:
    """The stored JSON of each item as it is, joined: nothing decoded only to be encoded again."""
    body, _ = list_body(target.rt, ListResult([], raw.resource_version, raw.next_key))
    head = jsoncodec.encode(body)
    assert head.endswith(b"[]}")
    return Response(head[:-2] + ",".join(raw.items).encode("utf-8") + b"]}", media_type="application/json")


def _list_response(request: Request, ctx: ServerContext, target: Target) -> Response:
    if not wants_table(request) and target.rt is not CRDS:
        query = _list_query(request, target)
        if query["object_filter"] is None:
            return _raw_list(target, ctx.store.list_raw(target.rt.key, target.namespace, **query))
    result = list_objects(request, ctx, target)
    body, list_meta = list_body(target.rt, result)
    if wants_table(request):
        return json_response(
            to_table(target.rt, result.items, list_meta, request.query_params.get("includeObject", "Metadata"))
        )
    return json_response(body)


def _store_update(ctx: ServerContext, rt: ResourceType, obj: Unstructured, old: Unstructured) -> Unstructured:
    try:  # (``obj`` built for this request alone; ``old`` as read for it)
        return ctx.store.update(rt.key, obj, copy=False, expected=old)
    except ConflictError:
        raise errors.conflict(rt, obj["metadata"]["name"]) from None
    except NotFoundError:
        raise errors.not_found(rt, obj["metadata"]["name"]) from None


def _finish_update(
    request: Request, ctx: ServerContext, target: Target, old: Unstructured, new: Unstructured
) -> Response:
    """Shared by replace and patch: status vs main resource, immutable fields, admission, store."""
    rt = target.rt
    new, warnings = builtin.admit(rt, new, field_validation_mode(request.query_params.get("fieldValidation")))
    meta = new.setdefault("metadata", {})
    for key in ("name", "namespace", "uid", "creationTimestamp"):
        if key in old["metadata"]:
            meta[key] = old["metadata"][key]
    new["kind"], new["apiVersion"] = rt.kind, rt.api_version
    if target.subresource == "status":
        status = new.get("status")
        new = copy.deepcopy(old)
        new["status"] = status
        new["metadata"]["resourceVersion"] = meta.get("resourceVersion", old["metadata"]["resourceVersion"])
        if rt.trainer is not None:
            check_trainer_status(rt, new, old)
    else:
        if rt.has_status:
            new["status"] = old.get("status")
            if new["status"] is None:
                new.pop("status")
        if rt.training_job is not None:
            mode = field_validation_mode(request.query_params.get("fieldValidation"))
            new, job_warnings = admit_training_job(rt, new, old, mode)
            warnings += job_warnings
        elif rt.trainer is not None:
            mode = field_validation_mode(request.query_params.get("fieldValidation"))
            new, job_warnings = admit_trainer_object(ctx.store, rt, new, old, mode)
            warnings += job_warnings
        elif rt.key == BATCH_JOBS:
            batchjobs.admit_update(rt, new, old)
        capacity.admit(ctx.store, rt, new, old)
        _fold_string_data(rt, new)
        canonical_form(rt, new, new=False)
        if rt.key == PODS.key:
            validate_pod_update(rt, new, old)
        if request.headers.get("content-type", "").split(";")[0].strip() != APPLY_PATCH:
            managed.record_update(old, new, _manager(request), rt.api_version)
    if target.subresource != "status":
        rbacadmission.admit(request, ctx, rt, new, old)
    builtin.validate(rt, new)
    if _dry_run(request):
        return _single(request, rt, new, 200, warnings)
    return _single(request, rt, _store_update(ctx, rt, new, old), 200, warnings)


finish_update = _finish_update  # server-side apply (apply.py) ends like a patch


def _manager(request: Request) -> str:
    return managed.manager_of(request.query_params.get("fieldManager"), request.headers.get("user-agent", ""))


async def replace(request: Request, ctx: ServerContext, target: Target) -> Response:
    raw = await read_raw(request, ctx.settings.max_body_bytes)
    return await offload.run(_replace, request, ctx, target, raw)


def _replace(request: Request, ctx: ServerContext, target: Target, raw: bytes) -> Response:
    new = _check_type(target.rt, decode_body(request, raw))
    if new["metadata"].get("name") not in (None, target.name):
        raise errors.bad_request(
            f"the name of the object ({new['metadata']['name']}) does not match the name on the URL ({target.name})"
        )
    return _finish_update(request, ctx, target, _get(ctx, target), new)


# kube-apiserver's maxRetryWhenPatchConflicts: a patch (or apply) that meets a write landing
# between its read and its write is applied again to the new object, unless it names a resourceVersion.
MAX_PATCH_CONFLICT_RETRIES = 5


async def patch(request: Request, ctx: ServerContext, target: Target) -> Response:
    content_type = request.headers.get("content-type", "")
    if content_type.startswith(APPLY_PATCH):
        raise errors.unsupported_media_type(
            f"{APPLY_PATCH} (server-side apply is not supported by the embedded control plane; "
            "use kubectl apply without --server-side)"
        )
    raw = await read_raw(request, ctx.settings.max_body_bytes)
    return await offload.run(_patch, request, ctx, target, content_type, raw)


def _patch(request: Request, ctx: ServerContext, target: Target, content_type: str, raw: bytes) -> Response:
    body = decode_body(request, raw)
    pinned = _names_resource_version(content_type, body)
    return retry_on_conflict(lambda: _patch_once(request, ctx, target, content_type, body), pinned)


def retry_on_conflict(attempt: Callable[[], Response], pinned: bool) -> Response:
    """``attempt()``, again on a Conflict while ``pinned`` (the request's own resourceVersion) is not set."""
    for tries in range(MAX_PATCH_CONFLICT_RETRIES + 1):
        try:
            return attempt()
        except errors.ApiError as exc:
            if exc.code != 409 or exc.reason != "Conflict" or pinned or tries == MAX_PATCH_CONFLICT_RETRIES:
                raise
    raise AssertionError("unreachable")


def _names_resource_version(content_type: str, body: Any) -> bool:
    """Whether a patch sets ``metadata.resourceVersion`` (a precondition: its Conflict is the answer)."""
    if isinstance(body, list):  # JSON patch
        return any(isinstance(op, dict) and op.get("path") == "/metadata/resourceVersion" for op in body)
    meta = body.get("metadata") if isinstance(body, dict) else None
    return isinstance(meta, dict) and meta.get("resourceVersion") is not None


def _patch_once(request: Request, ctx: ServerContext, target: Target, content_type: str, body: Any) -> Response:
    old = _get(ctx, target)
    try:
        new = apply_patch(content_type, copy.deepcopy(old), body)
    except PatchError as exc:
        raise errors.ApiError(
            422 if "could not be applied" in str(exc) else 400,
            "Invalid" if "could not be applied" in str(exc) else "BadRequest",
            str(exc),
        ) from None
    except (TypeError, AttributeError, ValueError, KeyError, IndexError, RecursionError) as exc:
        # a patch whose directives do not fit the object ($deleteFromPrimitiveList of a map, …)
        raise errors.bad_request(f"the patch could not be applied: {type(exc).__name__}: {exc}") from None
    if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
        raise errors.bad_request("the patched object is not a JSON object with metadata")
    return _finish_update(request, ctx, target, old, new)


async def _read_delete_options(request: Request, ctx: ServerContext) -> bytes | None:
    if limits.content_length(request.headers.get("content-length")) > 0:
        return await read_raw(request, ctx.settings.max_body_bytes)
    return None


def _delete_options(request: Request, raw: bytes | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if raw is not None:
        options = structure.decode_delete_options(decode_body(request, raw))
    query = request.query_params
    if "propagationPolicy" in query:
        options["propagationPolicy"] = query["propagationPolicy"]
    if query.getlist("dryRun"):
        options["dryRun"] = query.getlist("dryRun")
    policy = options.get("propagationPolicy")
    if policy not in (None, "Orphan", "Background", "Foreground"):
        raise errors.bad_request(
            f'propagationPolicy must be one of "Orphan", "Background", "Foreground" (got "{policy}")'
        )
    if options.get("orphanDependents") is True:
        options.setdefault("propagationPolicy", "Orphan")
    return options


def delete_object(ctx: ServerContext, rt: ResourceType, obj: Unstructured, policy: str | None) -> Unstructured:
    """Delete one object and garbage-collect its dependents (ownerReferences) per ``policy``."""
    meta = obj["metadata"]
    namespace, uid = meta.get("namespace", ""), meta["uid"]
    if policy is None:
        policy = "Orphan" if rt.key == BATCH_JOBS else "Background"
    if rt is NAMESPACES:
        for other in BY_KEY.values():
            if other.namespaced and other is not CRDS:
                for item in ctx.store.list(other.key, meta["name"]).items:
                    delete_object(ctx, other, item, "Background")
    # Controllers run beside this request (it runs on a thread): the owner is marked or gone first,
    # and its dependents listed after that, so a child a controller wrote meanwhile is among them
    # (and the store refuses a controller's child for an owner being deleted: Store.create's owner).
    if policy == "Orphan":
        for key, ns, name in ctx.store.dependents(uid):
            _orphan(ctx, key, ns, name, uid)
    elif policy == "Foreground" and not meta.get("deletionTimestamp"):
        try:
            ctx.store.mark_deleting(rt.key, namespace, meta["name"], uid, FOREGROUND_DELETION)
        except NotFoundError:
            raise errors.not_found(rt, meta["name"]) from None
        _delete_dependents(ctx, ctx.store.dependents(uid), policy)
        try:
            deleted = ctx.store.update_with(rt.key, namespace, meta["name"], _without_foreground_finalizer)
        except NotFoundError:
            raise errors.not_found(rt, meta["name"]) from None
        assert deleted is not None
        return deleted
    elif policy == "Foreground":
        _delete_dependents(ctx, ctx.store.dependents(uid), policy)
    try:
        deleted = ctx.store.delete(rt.key, namespace, meta["name"], uid=uid, expected=obj)
    except NotFoundError:
        raise errors.not_found(rt, meta["name"]) from None
    if policy == "Background":
        _delete_dependents(ctx, ctx.store.dependents(uid), policy)
    return deleted


FOREGROUND_DELETION = "foregroundDeletion"


def _without_foreground_finalizer(obj: Unstructured) -> Unstructured:
    """The owner once its dependents are gone: without the finalizer (removed, unless others remain)."""
    meta = obj["metadata"]
    meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != FOREGROUND_DELETION]
    if not meta["finalizers"]:
        del meta["finalizers"]
    return obj


def _orphan(ctx: ServerContext, resource: str, namespace: str, name: str, owner_uid: str) -> None:
    """Drop ``owner_uid`` from a dependent's ownerReferences (read again if a controller wrote it meanwhile)."""
    for _ in range(MAX_PATCH_CONFLICT_RETRIES + 1):
        child = ctx.store.get(resource, namespace, name)
        if child is None:
            return
        refs = child["metadata"].get("ownerReferences") or []
        child["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != owner_uid]
        try:
            ctx.store.update(resource, child)
            return
        except ConflictError:
            continue
        except NotFoundError:
            return


def _delete_dependents(ctx: ServerContext, dependents: list[tuple[str, str, str]], policy: str) -> None:
    for key, ns, name in dependents:
        child = ctx.store.get(key, ns, name)
        if child is not None:
            with contextlib.suppress(errors.ApiError):  # deleted meanwhile
                delete_object(ctx, BY_KEY[key], child, policy)


async def delete(request: Request, ctx: ServerContext, target: Target) -> Response:
    raw = await _read_delete_options(request, ctx)
    return await offload.run(_delete, request, ctx, target, raw)


def _delete(request: Request, ctx: ServerContext, target: Target, raw: bytes | None) -> Response:
    rt = target.rt
    options = _delete_options(request, raw)
    obj = _get(ctx, target)
    if rt is NAMESPACES and target.name in PROTECTED_NAMESPACES:
        raise errors.ApiError(
            403, "Forbidden", f'namespaces "{target.name}" is forbidden: this namespace may not be deleted'
        )
    preconditions = options.get("preconditions") or {}
    if preconditions.get("uid") not in (None, obj["metadata"]["uid"]):
        raise errors.ApiError(
            409,
            "Conflict",
            f"Precondition failed: UID in precondition: {preconditions['uid']}, "
            f"UID in object meta: {obj['metadata']['uid']}",
        )
    if preconditions.get("resourceVersion") not in (None, obj["metadata"]["resourceVersion"]):
        raise errors.conflict(rt, obj["metadata"]["name"])
    if options.get("dryRun"):
        return _single(request, rt, obj)
    return _single(request, rt, delete_object(ctx, rt, obj, options.get("propagationPolicy")))


async def delete_collection(request: Request, ctx: ServerContext, target: Target) -> Response:
    raw = await _read_delete_options(request, ctx)
    return await offload.run(_delete_collection, request, ctx, target, raw)


def _delete_collection(request: Request, ctx: ServerContext, target: Target, raw: bytes | None) -> Response:
    rt = target.rt
    options = _delete_options(request, raw)
    result = list_objects(request, ctx, target)
    deleted = []
    for obj in result.items:
        if rt is NAMESPACES and obj["metadata"]["name"] in PROTECTED_NAMESPACES:
            continue
        if options.get("dryRun"):
            deleted.append(obj)
            continue
        try:
            deleted.append(delete_object(ctx, rt, obj, options.get("propagationPolicy")))
        except errors.ApiError:
            continue
    body, _ = list_body(rt, ListResult(deleted, ctx.store.resource_version, None))
    return json_response(body)


async def ensure_initial_namespaces(ctx: ServerContext, names: tuple[str, ...]) -> None:
    for name in names:
        if ctx.store.get(NAMESPACES.key, "", name) is None:
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            canonical_form(NAMESPACES, namespace, new=True)
            ctx.store.create(NAMESPACES.key, {**namespace, "status": {"phase": "Active"}})
    # every namespace has its default account, those of a store from before accounts existed too
    for item in ctx.store.list(NAMESPACES.key).items:
        serviceaccount.ensure_default(ctx.store, item["metadata"]["name"])


__all__ = ["create", "delete", "delete_collection", "get", "list_", "patch", "replace"]
