"""What each pool yields in schedulable units, and what a team's quota means in those units.

The units are Kubernetes extended resources, because that is what Kueue counts: full cards are
``nvidia.com/gpu``, time-sliced cards ``nvidia.com/gpu.shared`` replicas (or ``nvidia.com/gpu`` when
renaming is off), MIG cards ``nvidia.com/mig-<profile>`` instances (the GPU Operator's mixed strategy).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.gpus import GpuModel, units
from gpufleet.policy.model import UNLIMITED, Limit, Pool, PoolQuota
from gpufleet.policy.slicing import SlicingDecision, SlicingMode, renames_shared

GPU = "nvidia.com/gpu"
SHARED_GPU = "nvidia.com/gpu.shared"


def mig_resource(profile: str) -> str:
    return f"nvidia.com/mig-{profile}"


@dataclass(frozen=True)
class PoolCapacity:
    """One pool resolved: its card, how it is sliced, and the units it yields per resource."""

    pool: Pool
    gpu: GpuModel
    decision: SlicingDecision
    units: dict[str, int]  # resource name -> schedulable units in the whole pool

    @property
    def name(self) -> str:
        return self.pool.name

    @property
    def resources(self) -> tuple[str, ...]:
        return tuple(self.units)

    def units_per_node(self, resource: str) -> int:
        return self.units[resource] // self.pool.node_count


def pool_capacity(pool: Pool, gpu: GpuModel, decision: SlicingDecision) -> PoolCapacity:
    count = pool.gpu_count
    if decision.mode is SlicingMode.MIG and decision.layout is not None:
        per_profile = units(gpu, decision.layout, count)
        yielded = {mig_resource(profile): n for profile, n in sorted(per_profile.items())}
    elif decision.mode is SlicingMode.TIMESLICE and decision.replicas is not None:
        yielded = {SHARED_GPU if renames_shared(pool) else GPU: count * decision.replicas}
    else:
        yielded = {GPU: count}
    return PoolCapacity(pool=pool, gpu=gpu, decision=decision, units=yielded)


def nominal(quota: PoolQuota, capacity: PoolCapacity) -> dict[str, int]:
    """A team's guaranteed units per resource of the pool (0 for the pool's resources it did not ask for)."""
    out = dict.fromkeys(capacity.units, 0)
    if capacity.decision.mode is SlicingMode.MIG:
        for profile, count in quota.mig.items():
            out[mig_resource(profile)] = count
    elif quota.gpus is not None:
        (resource,) = capacity.units
        out[resource] = quota.gpus
    return out


def limit_value(limit: Limit) -> int | None:
    """Kueue's encoding: ``None`` is unlimited."""
    return None if limit == UNLIMITED else int(limit)
