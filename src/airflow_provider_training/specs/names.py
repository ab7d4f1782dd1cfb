"""Kubernetes name and label syntax (``k8s.io/apimachinery/pkg/util/validation``), same messages."""

from __future__ import annotations

import re

DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _max_len(limit: int) -> str:
    return f"must be no more than {limit} characters"


def dns1035_label(value: str) -> list[str]:
    errors = [] if len(value) <= 63 else [_max_len(63)]
    if not DNS1035_LABEL.match(value):
        errors.append(DNS1035_MSG)
    return errors


def dns1123_label(value: str) -> list[str]:
    errors = [] if len(value) <= 63 else [_max_len(63)]
    if not DNS1123_LABEL.match(value):
        errors.append(DNS1123_LABEL_MSG)
    return errors


def dns1123_subdomain(value: str) -> list[str]:
    errors = [] if len(value) <= 253 else [_max_len(253)]
    if not DNS1123_SUBDOMAIN.match(value):
        errors.append(DNS1123_SUBDOMAIN_MSG)
    return errors


def qualified_name(value: str) -> list[str]:
    """A label or annotation key: optional DNS-subdomain prefix, '/', and a name of ≤ 63 chars."""
    prefix, _, name = value.rpartition("/")
    errors: list[str] = []
    if prefix:
        errors += [f"prefix part {e}" for e in dns1123_subdomain(prefix)]
    elif value.startswith("/"):
        errors.append("prefix part must be non-empty")
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    elif not QUALIFIED_NAME.match(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
            "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
            "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        )
    return errors


def label_value(value: str) -> list[str]:
    errors = [] if len(value) <= 63 else [_max_len(63)]
    if not LABEL_VALUE.match(value):
        errors.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
            "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
            "'my_value',  or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        )
    return errors


_PATH_CHARS = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")


def domain_prefixed_path(value: str) -> list[str]:
    """``IsDomainPrefixedPath`` (``acme.io/foo``): its field errors, ``Required value`` / ``Invalid value: …``."""
    if not value:
        return ["Required value"]
    parts = value.split("/", 1)
    if len(parts) < 2:
        return [f'Invalid value: "{value}": must be a domain-prefixed path (such as "acme.io/foo")']
    host, rest = parts
    errors = [f'Invalid value: "{host}": {err}' for err in dns1123_subdomain(host)]
    if not _PATH_CHARS.match(rest):
        errors.append(f'Invalid value: "{rest}": Invalid path')
    return errors
