"""Who a request is: kube-apiserver's ``user.Info`` (name, uid, groups, extra) and the names it
gives service accounts and the groups every authenticated user is in."""

from __future__ import annotations

from dataclasses import dataclass, field

MASTERS = "system:masters"  # kube-apiserver allows this group everything, before RBAC
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
SERVICE_ACCOUNTS = "system:serviceaccounts"
SA_PREFIX = "system:serviceaccount:"
# The user of the admin kubeconfig the control plane writes (kubeadm's name for it).
ADMIN_NAME = "kubernetes-admin"
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
CREDENTIAL_ID_EXTRA = "authentication.kubernetes.io/credential-id"


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())

    @property
    def privileged(self) -> bool:
        return MASTERS in self.groups

    @property
    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) when this is a service account's user name."""
        return split_service_account(self.name)

    def extra_dict(self) -> dict[str, list[str]]:
        return {key: list(values) for key, values in self.extra}

    def to_user_info(self) -> dict[str, object]:
        """The ``UserInfo`` of authentication.k8s.io/v1 (SelfSubjectReview, TokenReview)."""
        out: dict[str, object] = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = self.extra_dict()
        return out


def service_account_name(namespace: str, name: str) -> str:
    return f"{SA_PREFIX}{namespace}:{name}"


def split_service_account(username: str) -> tuple[str, str] | None:
    if not username.startswith(SA_PREFIX):
        return None
    namespace, sep, name = username[len(SA_PREFIX) :].partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return namespace, name


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return (SERVICE_ACCOUNTS, f"{SERVICE_ACCOUNTS}:{namespace}", AUTHENTICATED)


def service_account_user(
    namespace: str, name: str, uid: str = "", extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
) -> UserInfo:
    return UserInfo(service_account_name(namespace, name), uid, service_account_groups(namespace), extra)


ADMIN = UserInfo(ADMIN_NAME, "", (MASTERS, AUTHENTICATED))
