"""Server-side apply (``PATCH`` with ``application/apply-patch+yaml``): ``kubectl apply --server-side``.

The applied configuration is the manager's intent: fields in it are set (merged into the object
as a strategic merge patch: lists with a merge key by key, others atomic) and owned by the manager;
fields it applied before and no longer applies are removed unless someone else owns them. A field
whose value it would change and that another manager owns is a conflict — 409 with kube-apiserver's
message (``Apply failed with 1 conflict: conflict with "kubectl-create" using v1: .data.mode``) —
unless ``force=true``, which takes the field over. An apply to a missing object creates it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from airflow_provider_training.embedded.apiserver import crud, errors, managed, offload
from airflow_provider_training.embedded.apiserver.context import ServerContext
from airflow_provider_training.embedded.apiserver.http import Target, decode_body, flag, json_response, read_raw
from airflow_provider_training.embedded.apiserver.patch import strategic_merge_patch


def _conflict(conflicts: list[tuple[tuple[str, str], str, managed.Path]]) -> errors.ApiError:
    def who(key: tuple[str, str], api_version: str) -> str:
        name = json.dumps(key[0])
        return f"{name} using {api_version}" if key[1] == "Update" else name

    causes = [
        {"reason": "FieldManagerConflict", "message": f"conflict with {who(k, v)}", "field": managed.path_text(p)}
        for k, v, p in conflicts
    ]
    if len(conflicts) == 1:
        key, api_version, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {who(key, api_version)}: {managed.path_text(path)}"
    else:
        grouped: dict[str, list[str]] = {}
        for key, api_version, path in conflicts:
            grouped.setdefault(who(key, api_version), []).append(managed.path_text(path))
        listed = "\n".join(f"conflicts with {m}:\n" + "\n".join(f"- {p}" for p in ps) for m, ps in grouped.items())
        message = f"Apply failed with {len(conflicts)} conflicts: {listed}"
    return errors.ApiError(409, "Conflict", message, {"causes": causes})


async def server_side_apply(request: Request, ctx: ServerContext, target: Target) -> Response:
    if not request.query_params.get("fieldManager"):
        raise errors.bad_request("PATCH: fieldManager is required for apply requests")
    raw = await read_raw(request, ctx.settings.max_body_bytes)
    return await offload.run(_apply, request, ctx, target, raw)


def _apply(request: Request, ctx: ServerContext, target: Target, raw: bytes) -> Response:
    applied = decode_body(request, raw)
    if not isinstance(applied, dict) or not isinstance(applied.get("metadata", {}), dict):
        raise errors.bad_request("the applied configuration must be an object with metadata")
    applied.setdefault("metadata", {})
    if applied["metadata"].get("name") not in (None, target.name):
        raise errors.bad_request(
            f"the name of the object ({applied['metadata']['name']}) does not match the name on the URL ({target.name})"
        )
    applied["metadata"]["name"] = target.name
    if target.subresource != "status":
        applied.pop("status", None)
    pinned = applied["metadata"].get("resourceVersion") is not None
    return crud.retry_on_conflict(lambda: _apply_once(request, ctx, target, applied), pinned)


def _apply_once(request: Request, ctx: ServerContext, target: Target, applied: dict[str, Any]) -> Response:
    rt = target.rt
    manager = request.query_params["fieldManager"]
    paths = managed.field_set(applied)
    key = (manager, "Apply")
    current = ctx.store.get(rt.key, target.store_namespace, target.name or "")
    if current is None:
        obj = copy.deepcopy(applied)
        managers = managed.Managers(None)
        managers.own(manager, "Apply", rt.api_version, paths)
        managers.write(obj)
        return crud.create_object(request, ctx, target, obj, record_manager=False)
    managers = managed.Managers(current)
    force = flag(request.query_params.get("force"))
    conflicts = []
    changing = {p for p in managed.changed_paths(current, applied) if p[-1] != managed.ELEMENT}
    for other, (api_version, owned) in managers.entries.items():
        if other == key:
            continue
        conflicts += [(other, api_version, path) for path in sorted(changing & owned)]
    if conflicts and not force:
        raise _conflict(conflicts)
    taken = {path for _, _, path in conflicts}
    new = strategic_merge_patch(copy.deepcopy(current), {k: v for k, v in applied.items() if k != "metadata"})
    meta_patch = {k: v for k, v in applied["metadata"].items() if k != "managedFields"}
    new["metadata"] = strategic_merge_patch(new.get("metadata") or {}, meta_patch)
    previously = managers.entries.get(key, (rt.api_version, set()))[1]
    others = set().union(*(owned for k, (_, owned) in managers.entries.items() if k != key))
    for path in sorted(previously - paths - (others - taken), key=len, reverse=True):
        managed.remove_path(new, path)
    managers.give_up(taken, key)
    managers.own(manager, "Apply", rt.api_version, paths)
    managers.write(new)
    if new == current:  # nothing to change: no write, no new resourceVersion (as kube-apiserver)
        return json_response(current)
    return crud.finish_update(request, ctx, target, current, new)
