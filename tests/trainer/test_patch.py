"""Strategic merge of runtime patches into a JobSet spec (``strategicpatch`` semantics for JobSet)."""

from __future__ import annotations

from airflow_provider_training.frameworks.trainer.patch import merge

SPEC = {
    "replicatedJobs": [
        {"name": "a", "template": {"spec": {"template": {"spec": {
            "containers": [{"name": "node", "image": "i", "env": [{"name": "X", "value": "1"}],
                            "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
            "tolerations": [{"key": "old"}],
            "nodeSelector": {"zone": "a", "pool": "cpu"}}}}}},
        {"name": "b"},
    ]
}  # fmt: skip


def _pod(spec: dict, job: int = 0) -> dict:  # type: ignore[type-arg]
    return spec["replicatedJobs"][job]["template"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def test_lists_with_merge_keys_merge_others_replace_and_null_deletes() -> None:
    patch = {"replicatedJobs": [{"name": "a", "template": {"spec": {"template": {"spec": {
        "containers": [{"name": "node", "env": [{"name": "Y", "value": "2"}],
                        "volumeMounts": [{"name": "w", "mountPath": "/v"}]}],
        "tolerations": [{"key": "new"}],
        "nodeSelector": {"zone": None, "pool": "gpu"}}}}}}]}  # fmt: skip
    merged = merge(SPEC, patch)
    pod = _pod(merged)
    container = pod["containers"][0]
    assert container["image"] == "i"
    assert container["env"] == [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]
    assert container["volumeMounts"] == [{"name": "w", "mountPath": "/v"}]  # merged on mountPath
    assert pod["tolerations"] == [{"key": "new"}]
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert [j["name"] for j in merged["replicatedJobs"]] == ["a", "b"]
    assert _pod(SPEC)["nodeSelector"] == {"zone": "a", "pool": "cpu"}  # the input is untouched


def test_patch_directives() -> None:
    deleted = merge(SPEC, {"replicatedJobs": [{"name": "b", "$patch": "delete"}]})
    assert [j["name"] for j in deleted["replicatedJobs"]] == ["a"]
    replaced = merge(SPEC, {"replicatedJobs": [{"name": "a", "template": {"spec": {"template": {"spec": {
        "nodeSelector": {"$patch": "replace", "only": "this"}}}}}}]})  # fmt: skip
    assert _pod(replaced)["nodeSelector"] == {"only": "this"}
