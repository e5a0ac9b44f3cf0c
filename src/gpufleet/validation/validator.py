"""Validate rendered objects offline: built-in kinds, custom resources, and kinds nobody defines.

For each object, in input order:

1. kustomize's own ``Kustomization``/``Component`` are build instructions, not objects: skipped.
2. An object without ``apiVersion`` and ``kind`` strings is a finding.
3. A kind a CRD defines (its ``status`` dropped first where the CRD has a status subresource, as a
   create does): the served version's schema (``schema``, after defaulting), the structural
   pass (``structural``), then the CEL rules (``rules``) unless a blocking error stopped them, as in
   the API server. A version the CRD does not serve is a finding.
4. Otherwise a built-in kind of the target Kubernetes version (``builtin``), with the loose ObjectMeta
   check on top; a kind neither knows is a finding, never accepted.

Findings are sorted by ``finding.sort_key``: object position, source, path, message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.validation.builtin import check_builtin, schema_version
from gpufleet.validation.crds import CrdIndex, CrdVersion
from gpufleet.validation.finding import Finding, object_ref, sort_key
from gpufleet.validation.metadata import check_metadata
from gpufleet.validation.rules import check_rules
from gpufleet.validation.schema import check_schema, prepare
from gpufleet.validation.structural import check_structure

_KUSTOMIZE_GROUP = "kustomize.config.k8s.io"
_NOT_CHECKED = (
    "some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)


def validate(objects: Sequence[Mapping[str, Any]], *, kubernetes: str, crds: CrdIndex | None) -> list[Finding]:
    """Every finding for ``objects`` against Kubernetes ``kubernetes`` (e.g. ``"1.34"``) and ``crds``.

    An unsupported ``kubernetes`` version raises ``InputError``; everything wrong with an object is
    a ``Finding``.
    """
    schema_version(kubernetes)  # fail early, once, on a target version we cannot check
    ordered: list[tuple[tuple[int, int, str, str], Finding]] = []
    for position, obj in enumerate(objects):
        for found in _check_object(obj, position, kubernetes, crds):
            ordered.append((sort_key(position, found), found))
    ordered.sort(key=lambda pair: pair[0])
    return [found for _, found in ordered]


def _check_object(obj: Any, position: int, kubernetes: str, crds: CrdIndex | None) -> list[Finding]:
    if not isinstance(obj, Mapping):
        return [Finding(f"object[{position}]", "", "is not a mapping (a Kubernetes object)", "schema")]
    ref = object_ref(obj, position)
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not api_version or not isinstance(kind, str) or not kind:
        return [
            Finding(ref, name, "Required value: every object needs apiVersion and kind", "schema")
            for name in ("apiVersion", "kind")
            if not isinstance(obj.get(name), str) or not obj.get(name)
        ]
    if api_version.partition("/")[0] == _KUSTOMIZE_GROUP:
        return []
    resolution = crds.resolve(api_version, kind) if crds is not None else None
    if resolution is not None and resolution.version is not None:
        return _check_custom(obj, resolution.version, ref)
    if resolution is not None and resolution.defined:
        served = ", ".join(resolution.served)
        return [
            Finding(
                ref,
                "apiVersion",
                f"{api_version} is not a served version of {kind} (served: {served})",
                "schema",
            )
        ]
    found = check_builtin(obj, kubernetes, ref)
    if found is None:
        where = "the given CRDs" if crds is not None else "any CRD (none were given)"
        return [
            Finding(
                ref,
                "apiVersion",
                f"no schema for {kind} in {api_version}: not a built-in kind of Kubernetes {kubernetes} "
                f"and not defined by {where}",
                "schema",
            )
        ]
    meta, _ = check_metadata(obj.get("metadata"), ref, "metadata", custom=False)
    return found + meta


def _check_custom(obj: Mapping[str, Any], crd: CrdVersion, ref: str) -> list[Finding]:
    if crd.status_subresource and "status" in obj:
        # A create cannot set status through the main resource: the API server drops it unchecked.
        obj = {name: value for name, value in obj.items() if name != "status"}
    prepared = prepare(obj, crd.schema)
    schema_findings, schema_blocks = check_schema(prepared, crd, ref)
    structural, structure_blocks = check_structure(prepared, crd.schema, ref)
    findings = schema_findings + structural
    if schema_blocks or structure_blocks:
        findings.append(Finding(ref, "", _NOT_CHECKED, "cel"))
    else:
        findings.extend(check_rules(prepared, crd.schema, ref))
    return findings
