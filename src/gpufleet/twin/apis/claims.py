"""Kueue v0.19.2: ``pkg/dra/claims.go``, ``pkg/controller/core/workload_controller.go`` (DRA),
``pkg/config/validation.go`` (``validateDeviceClassMappings``).

How Kueue counts a pod's ResourceClaims against quota, with ``KueueDRAIntegration`` on (its default):

- a pod set whose pod names a ResourceClaim directly (``resourceClaimName``) makes the whole workload
  inadmissible ("KueueDRAIntegration feature does not support use of resource claims");
- each claim made from a ResourceClaimTemplate counts its requests per DeviceClass: ``exactly`` with
  ``allocationMode: ExactCount`` adds ``count``; FirstAvailable, AdminAccess and AllocationMode All are
  refused with a field error; an empty class name is skipped;
- each class is mapped by ``resources.deviceClassMappings`` to a logical resource and added to each
  pod's requests (so the pod set's count multiplies it); an unmapped class is refused.

The first error stops the walk, and Kueue writes it (``field.Error``'s text) as the QuotaReserved
message. What the twin cannot know without the cluster's ResourceSlices it refuses as input: CEL
selectors in a claim's request (Kueue checks them against the devices) and mappings with ``sources``
(partitionable devices counted by counters).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpufleet.twin.apis.fields import Doc

#: Kueue's message for a pod that names a ResourceClaim (workload_controller.go)
NAMED_CLAIMS = "KueueDRAIntegration feature does not support use of resource claims"
MAX_CLASSES = 8  # validateDeviceClassMappings: field.TooMany(..., 8)


def read_device_class_mappings(doc: Doc, raw: Any) -> tuple[tuple[str, str], ...]:
    """``resources.deviceClassMappings`` as sorted (DeviceClass, resource) pairs, with Kueue's validation."""
    seen: dict[str, str] = {}
    for mpath, mapping in doc.mappings("resources.deviceClassMappings", raw):
        name = str(mapping.get("name") or "")
        if not name:
            doc.fail(f"{mpath}.name", "name is required")
        if mapping.get("sources"):
            doc.fail(f"{mpath}.sources", "the twin counts whole devices only (no counter or capacity sources)")
        classes = doc.strings(f"{mpath}.deviceClassNames", mapping.get("deviceClassNames"))
        if not classes:
            doc.fail(f"{mpath}.deviceClassNames", "Required value")
        if len(classes) > MAX_CLASSES:
            doc.fail(f"{mpath}.deviceClassNames", f"Too many: {len(classes)}: must have at most {MAX_CLASSES} items")
        for i, klass in enumerate(classes):
            if klass in seen:
                doc.fail(
                    f"{mpath}.deviceClassNames[{i}]",
                    f'Invalid value: "{klass}": device class already mapped to resource {seen[klass]}',
                )
                continue
            seen[klass] = name
    return tuple(sorted(seen.items()))


@dataclass(frozen=True, slots=True)
class ClaimCount:
    """What a pod set's claims add to each pod's requests, or the error Kueue stops at."""

    requests: tuple[tuple[str, int], ...] = ()
    error: str = ""


def _field_error(path: str, kind: str, bad: Any, detail: str) -> str:
    """apimachinery's ``field.Error.Error()``: path, type, the bad value as JSON (omitted for internal
    errors), then the detail."""
    body = kind if bad is _OMIT else f"{kind}: {json.dumps(bad)}"
    return f"{path}: {body}: {detail}" if detail else f"{path}: {body}"


_OMIT = object()


def _template_counts(spec: dict[str, Any], template: str, at: str) -> tuple[dict[str, int], str]:
    """countDevicesPerClass over one template's ``spec.spec``: per class the devices it asks, or an error."""
    out: dict[str, int] = {}
    for k, req in enumerate(r for r in _requests(spec) if isinstance(r, dict)):
        rpath = f"{at}.devices.requests[{k}]"
        if req.get("firstAvailable"):
            detail = f"ResourceClaimTemplate {template}: FirstAvailable device selection is not supported"
            return {}, _field_error(rpath, "Invalid value", None, detail)
        exactly = req.get("exactly")
        if not isinstance(exactly, dict):
            detail = f"ResourceClaimTemplate {template}: Exactly must be set if FirstAvailable is nil"
            return {}, _field_error(rpath, "Invalid value", None, detail)
        if exactly.get("adminAccess") is True:
            detail = f"ResourceClaimTemplate {template}: AdminAccess is not supported"
            return {}, _field_error(f"{rpath}.exactly.adminAccess", "Invalid value", None, detail)
        mode = exactly.get("allocationMode") or "ExactCount"  # the API server's default
        if mode == "All":
            detail = f"ResourceClaimTemplate {template}: AllocationMode 'All' is not supported"
            return {}, _field_error(f"{rpath}.exactly.allocationMode", "Invalid value", "All", detail)
        if mode != "ExactCount":
            detail = f"ResourceClaimTemplate {template}: unsupported allocation mode: {mode}"
            return {}, _field_error(f"{rpath}.exactly.allocationMode", "Invalid value", mode, detail)
        klass = str(exactly.get("deviceClassName") or "")
        if klass:
            count = exactly.get("count", 1)
            out[klass] = out.get(klass, 0) + (count if isinstance(count, int) else 1)
    return out, ""


def uses_named_claims(pod_sets: list[dict[str, Any]]) -> bool:
    """Kueue's ``HasResourceClaim``: some pod set's pod names a ResourceClaim."""
    return any(isinstance(c, dict) and c.get("resourceClaimName") for ps in pod_sets for c in _claims(ps))


def _claims(pod_set: dict[str, Any]) -> list[Any]:
    return _list(_map(_map(pod_set, "template"), "spec"), "resourceClaims")


def claim_requests(
    doc: Doc,
    index: int,
    *,
    pod_set: dict[str, Any],
    namespace: str,
    templates: dict[tuple[str, str], dict[str, Any]],
    mappings: dict[str, str],
) -> ClaimCount:
    """GetResourceRequestsForResourceClaimTemplates for pod set ``index``: the logical resources one pod adds."""
    name = str(pod_set.get("name", "main"))
    total: dict[str, int] = {}
    for j, claim in enumerate(_claims(pod_set)):
        if not isinstance(claim, dict) or not claim.get("resourceClaimTemplateName"):
            continue
        template = str(claim["resourceClaimTemplateName"])
        at = f"spec.podSets[{index}].template.spec.resourceClaims[{j}]"
        spec = templates.get((namespace, template))
        if spec is None:
            missing = f'resourceclaimtemplates.resource.k8s.io "{template}" not found'
            detail = f"failed to get claim spec for ResourceClaimTemplate {template} in podset {name}: {missing}"
            return ClaimCount(error=_field_error(at, "Internal error", _OMIT, detail))
        for k, req in enumerate(r for r in _requests(spec) if isinstance(r, dict)):
            exactly = req.get("exactly")
            if isinstance(exactly, dict) and exactly.get("selectors"):
                doc.fail(
                    f"ResourceClaimTemplate {namespace}/{template} devices.requests[{k}].exactly.selectors",
                    "the twin cannot judge CEL selectors without the cluster's ResourceSlices",
                )
        counts, error = _template_counts(spec, template, at)
        if error:
            return ClaimCount(error=error)
        for klass, count in sorted(counts.items()):
            resource = mappings.get(klass)
            if resource is None:
                detail = f"DeviceClass {klass} is not mapped in DRA configuration for podset {name}"
                return ClaimCount(error=_field_error(f"{at}.resourceClaimTemplateName", "Not found", detail, ""))
            total[resource] = total.get(resource, 0) + count
    return ClaimCount(tuple(sorted(total.items())))


def _requests(spec: dict[str, Any]) -> list[Any]:
    return _list(_map(spec, "devices"), "requests")


def _map(node: dict[str, Any], key: str) -> dict[str, Any]:
    value = node.get(key)
    return value if isinstance(value, dict) else {}


def _list(node: dict[str, Any], key: str) -> list[Any]:
    value = node.get(key)
    return value if isinstance(value, list) else []
