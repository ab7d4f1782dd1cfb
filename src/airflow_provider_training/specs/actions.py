"""What an operator does with its object at the end, on a kill, on a failure, or when the name is
taken. String-valued enums: each member *is* its string (``OnFinishAction.DELETE == "delete"``), so
the operators keep accepting the plain strings users write in DAGs."""

from __future__ import annotations

from enum import StrEnum


class OnFinishAction(StrEnum):
    """After a job finished: keep it, delete it, or delete it only when it succeeded."""

    KEEP = "keep"
    DELETE = "delete"
    DELETE_SUCCEEDED = "delete_succeeded"

    def deletes(self, succeeded: bool) -> bool:
        """Whether a job that finished this way (``succeeded`` or not) is deleted."""
        return self is OnFinishAction.DELETE or (succeeded and self is OnFinishAction.DELETE_SUCCEEDED)


class OnKillAction(StrEnum):
    """When the task is killed while its job runs."""

    DELETE = "delete"
    KEEP = "keep"


class IfJobExists(StrEnum):
    """When the job's name is taken (``operators.identity.on_existing`` explains each)."""

    REATTACH = "reattach"
    RENAME = "rename"
    REPLACE = "replace"
    FAIL = "fail"


class RolloutAction(StrEnum):
    """A deployment's ``on_failure_action`` / ``on_kill_action``: keep what was applied, roll back
    to the previous spec, or delete the InferenceService."""

    KEEP = "keep"
    ROLLBACK = "rollback"
    DELETE = "delete"


OnFailureAction = RolloutAction


class JobDecision(StrEnum):
    """What the training operator does about a job that holds its name (``operators.identity.on_existing``):
    submit (the name is free), reattach to it, submit under another name, delete it first, or fail."""

    CREATE = "create"
    REATTACH = "reattach"
    RENAME = "rename"
    REPLACE = "replace"
    FAIL = "fail"
