"""Built-in kinds against the target Kubernetes version's strict schema (kubernetes-validate).

kubernetes-validate bundles the OpenAPI schemas of Kubernetes 1.25 to 1.37, each in a strict form
(no unknown fields), and stops at the first error of an object: that one is reported, with its path.
A kind or API version the target version does not serve (``admissionregistration.k8s.io/v1``
ValidatingAdmissionPolicy before 1.30, ``resource.k8s.io/v1`` before 1.34) has no schema there.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import kubernetes_validate
from kubernetes_validate import utils as kubernetes_validate_utils

from gpufleet.errors import InputError
from gpufleet.validation import finding as fp
from gpufleet.validation.finding import Finding
from gpufleet.validation.schema import plain

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?$")


@functools.cache
def supported_minors() -> tuple[tuple[int, int], ...]:
    """The (major, minor) versions kubernetes-validate has schemas for, oldest first."""
    found = {tuple(int(part) for part in v.split(".")[:2]) for v in kubernetes_validate_utils.all_versions()}
    return tuple(sorted((major, minor) for major, minor in found))


def schema_version(kubernetes: str) -> str:
    """The bundled schema version (``"1.34.0"``) for a target such as ``"1.34"`` or ``"v1.34.2"``.

    An unparsable or unsupported target is the user's mistake: an ``InputError`` that lists the range.
    """
    match = _VERSION.match(kubernetes.strip())
    minors = supported_minors()
    if match is None or (int(match.group(1)), int(match.group(2))) not in minors:
        first, last = minors[0], minors[-1]
        raise InputError.one(
            f"Kubernetes version {kubernetes!r} is not one offline validation supports "
            f"({first[0]}.{first[1]} to {last[0]}.{last[1]})",
            path="cluster.kubernetes",
        )
    return f"{match.group(1)}.{match.group(2)}.0"


def check_builtin(obj: Mapping[str, Any], kubernetes: str, ref: str) -> list[Finding] | None:
    """The first schema error of a built-in object, ``[]`` when valid, None when no schema exists."""
    version = schema_version(kubernetes)
    try:
        kubernetes_validate.validate(plain(obj), version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return None
    except kubernetes_validate.ValidationError as error:
        return [_finding(error, ref)]
    return []


def _finding(error: Any, ref: str) -> Finding:
    path = ""
    for part in error.path:
        path = fp.index(path, part) if isinstance(part, int) else fp.child(path, str(part))
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        declared = error.schema.get("properties") or {}
        unknown = sorted(name for name in error.instance if name not in declared)
        if unknown:
            return Finding(ref, fp.child(path, unknown[0]), f'unknown field "{unknown[0]}"', "structural")
    return Finding(ref, path, str(error.message), "schema")
