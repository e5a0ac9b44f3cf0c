"""ObjectMeta, checked loosely: the shape the API server insists on, nothing that standard metadata lacks.

Every object needs a ``name`` (or ``generateName``); label keys must be qualified names and label
values at most 63 characters of ``[A-Za-z0-9._-]`` starting and ending alphanumeric; annotation keys
are qualified names and values strings. For custom resources, whose CRD usually declares ``metadata``
as a bare ``object``, the field set of ObjectMeta and the DNS-subdomain name are checked too (the
API server's default for custom resources). Built-in kinds get their ObjectMeta field set checked by
their own strict schema, and some accept names that are not DNS subdomains (RBAC's ``system:…``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpufleet.validation import finding as fp
from gpufleet.validation.finding import Finding

_OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    }
)
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_DNS_LABEL_RE = re.compile(rf"^{_DNS_LABEL}$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def qualified_name_problem(text: str) -> str | None:
    """Why ``text`` is not a qualified name (``[prefix/]name``), or None when it is one."""
    prefix, slash, name = text.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"prefix {prefix!r} must be a DNS subdomain (lowercase alphanumerics, '-' and '.')"
    if not name or len(name) > 63 or not _NAME_PART.match(name):
        return (
            f"name part {name!r} must be 1-63 characters of alphanumerics, '-', '_' or '.',"
            " starting and ending with an alphanumeric"
        )
    return None


def label_value_problem(text: str) -> str | None:
    """Why ``text`` is not a valid label value, or None when it is one."""
    if len(text) > 63 or not _LABEL_VALUE.match(text):
        return (
            f"label value {text!r} must be at most 63 characters of alphanumerics, '-', '_' or '.',"
            " starting and ending with an alphanumeric"
        )
    return None


def check_metadata(meta: Any, ref: str, path: str, *, custom: bool) -> tuple[list[Finding], bool]:
    """The problems of one object's ``metadata`` and whether one of them blocks CEL evaluation."""
    if meta is None:
        meta = {}
    if not isinstance(meta, Mapping):
        return [Finding(ref, path, "metadata must be an object", "schema")], True
    findings: list[Finding] = []
    blocking = False
    name = meta.get("name")
    if not meta.get("generateName") and not name:
        findings.append(
            Finding(ref, fp.child(path, "name"), "Required value: name or generateName is required", "schema")
        )
        blocking = True
    if custom:
        for field in sorted(set(meta) - _OBJECT_META_FIELDS):
            findings.append(Finding(ref, fp.child(path, field), f'unknown field "{field}"', "structural"))
        for field in ("name", "namespace", "generateName"):
            if field in meta and not isinstance(meta[field], str):
                findings.append(Finding(ref, fp.child(path, field), "must be a string", "schema"))
                blocking = True
        if isinstance(name, str) and name and (len(name) > 253 or not _DNS_SUBDOMAIN.match(name)):
            findings.append(
                Finding(
                    ref,
                    fp.child(path, "name"),
                    f"{name!r} must be a DNS subdomain: at most 253 lowercase alphanumerics, '-' or '.'",
                    "schema",
                )
            )
        namespace = meta.get("namespace")
        if isinstance(namespace, str) and not _DNS_LABEL_RE.match(namespace):
            findings.append(Finding(ref, fp.child(path, "namespace"), f"{namespace!r} must be a DNS label", "schema"))
    for field, values in (("labels", True), ("annotations", False)):
        entries, entry_blocking = _string_map(meta.get(field), ref, fp.child(path, field), values_are_labels=values)
        findings.extend(entries)
        blocking = blocking or entry_blocking
    return findings, blocking


def _string_map(value: Any, ref: str, path: str, *, values_are_labels: bool) -> tuple[list[Finding], bool]:
    if value is None:
        return [], False
    if not isinstance(value, Mapping):
        return [Finding(ref, path, "must be a map of strings", "schema")], True
    findings: list[Finding] = []
    blocking = False
    for map_key, item in value.items():
        entry = fp.key(path, str(map_key))
        problem = qualified_name_problem(map_key) if isinstance(map_key, str) else "key must be a string"
        if problem:
            findings.append(Finding(ref, entry, f"invalid key: {problem}", "schema"))
        if not isinstance(item, str):
            findings.append(Finding(ref, entry, "value must be a string", "schema"))
            blocking = True
        elif values_are_labels and (problem := label_value_problem(item)):
            findings.append(Finding(ref, entry, problem, "schema"))
    return findings, blocking
