"""Dynamic Resource Allocation (``resource.k8s.io/v1``, Kubernetes 1.34+): DeviceClasses per GPU model and
MIG profile, a ResourceClaimTemplate per team namespace and pool unit, and Kueue's deviceClassMappings.

Each DeviceClass maps to the same quota resource the ClusterQueues already count (``nvidia.com/gpu``,
``nvidia.com/mig-<profile>``), so a claim and a device-plugin request draw on one budget.
The product match compares the DRA driver's ``productName`` with GPU Feature Discovery's label value,
which is the same string with spaces turned into dashes.
"""

from __future__ import annotations

from gpufleet.policy.capacity import PoolCapacity
from gpufleet.policy.dra import DRIVER, FIRST_DRA_MINOR, class_mappings, class_name, dra_pools, enabled, team_units
from gpufleet.policy.fleet import Fleet
from gpufleet.render.common import Obj, meta, obj

__all__ = ["API", "DRIVER", "FIRST_DRA_MINOR", "claim_templates", "device_class_mappings", "device_classes"]
__all__ += ["dra_pools", "enabled"]

API = "resource.k8s.io/v1"


def _expression(cap: PoolCapacity, resource: str) -> str:
    attrs = f'device.attributes["{DRIVER}"]'
    parts = [f'device.driver == "{DRIVER}"', f'{attrs}.productName.replace(" ", "-") == "{cap.gpu.product}"']
    if resource.startswith("nvidia.com/mig-") and cap.gpu.mig is not None:
        # The quota resource counts a ``+me`` instance under its base profile (as the device plugin
        # advertises it); NVIDIA's driver names its profile ``1g.10gb+me`` (go-nvlib MigProfileInfo.String).
        profiles = ", ".join(f'"{p.name}"' for p in cap.gpu.mig.profiles if p.resource_name == resource)
        parts += [f'{attrs}.type == "mig"', f"{attrs}.profile in [{profiles}]"]
    else:
        parts.append(f'{attrs}.type == "gpu"')
    return " && ".join(parts)


def device_classes(fleet: Fleet) -> list[Obj]:
    seen: dict[str, Obj] = {}
    for cap in dra_pools(fleet):
        for resource in cap.units:
            name = class_name(cap, resource)
            seen.setdefault(
                name,
                obj(
                    API,
                    "DeviceClass",
                    meta(name),
                    spec={"selectors": [{"cel": {"expression": _expression(cap, resource)}}]},
                ),
            )
    return list(seen.values())


def claim_templates(fleet: Fleet) -> list[Obj]:
    """One template per namespace and unit the team can be admitted on (policy.dra.team_units)."""
    out: list[Obj] = []
    for team in fleet.policy.teams:
        units = team_units(fleet, team)
        for namespace in team.namespaces:
            for unit in units:
                request = {
                    "name": "gpu",
                    "exactly": {"deviceClassName": unit.device_class, "allocationMode": "ExactCount", "count": 1},
                }
                spec = {"spec": {"devices": {"requests": [request]}}}
                out.append(obj(API, "ResourceClaimTemplate", meta(unit.template, namespace), spec=spec))
    return out


def device_class_mappings(fleet: Fleet) -> list[Obj]:
    return [{"name": r, "deviceClassNames": names} for r, names in class_mappings(fleet).items()]
