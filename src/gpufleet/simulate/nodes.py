"""The policy's pools as the nodes the scheduler sees, and what one device is worth in GPUs.

Each pool's nodes carry the labels and taints gpufleet renders (the pool selector, the GPU
Operator's config label, the ``gpufleet.io/pool`` taint); the first-apply world has the labels but
no taints. A MIG pool's cards are cut by the policy's layout; a time-sliced pool's cards are shared
``replicas`` ways. Names, CPU, memory and the other labels (GFD's, the kubelet's, the GPU model's)
are ``policy.node_shape``'s, the testbed's kwok nodes' too, so a differential compares like nodes.

A device's worth in GPUs (for GPU-hours and utilization): a full card 1; a MIG instance its compute
slices over the card's (3g on a 7-slice A100: 3/7); a time-slice replica 1/replicas.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from gpufleet.gpus import MigGeometry
from gpufleet.placement import NodeSpec, Taint, TaintEffect
from gpufleet.policy import Fleet, node_shape
from gpufleet.policy.capacity import PoolCapacity
from gpufleet.policy.slicing import SlicingMode
from gpufleet.render.common import pool_taints
from gpufleet.render.gpu_operator import node_labels

node_names = node_shape.node_names


@dataclass(frozen=True)
class PoolNodes:
    """One pool resolved for the simulation: its nodes and the GPU worth of one of its devices."""

    name: str
    role: str
    gpu_model: str
    mode: SlicingMode
    nodes: tuple[NodeSpec, ...]
    mig_worth: dict[str, Fraction]  # MIG profile -> GPUs per instance
    replica_worth: Fraction  # GPUs per time-slice replica (1 on full cards)

    @property
    def gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    def worth(self, devices: int, mig_profile: str) -> Fraction:
        """GPUs held by ``devices`` devices of a pod on this pool."""
        if mig_profile:
            return devices * self.mig_worth[mig_profile]
        return devices * self.replica_worth


def _mig_worth(geometry: MigGeometry | None, layout: dict[str, int]) -> dict[str, Fraction]:
    if geometry is None:
        return {}
    out = {}
    for name in layout:
        profile = geometry.profile(name)
        if profile is not None:
            out[name] = Fraction(profile.compute, geometry.compute_slices)
    return out


def pool_nodes(cap: PoolCapacity, *, tainted: bool) -> PoolNodes:
    pool, decision = cap.pool, cap.decision
    layout = dict(decision.layout or {}) if decision.mode is SlicingMode.MIG else {}
    card = tuple(profile for profile, count in sorted(layout.items()) for _ in range(count))
    replicas = decision.replicas if decision.mode is SlicingMode.TIMESLICE and decision.replicas else 1
    taints = tuple(Taint(t["key"], t["value"], TaintEffect(t["effect"])) for t in pool_taints(pool)) if tainted else ()
    per_node = pool.gpusPerNode
    nodes = tuple(
        NodeSpec(
            name=name,
            cpu_milli=node_shape.cpu_milli(cap),
            memory=node_shape.memory(cap),
            gpus=per_node,
            gpu_model=cap.gpu.name,
            mig=(card,) * per_node if card else (),
            timeslice_replicas=replicas,
            rename_shared="nvidia.com/gpu.shared" in cap.units,
            labels=tuple(sorted({**node_shape.labels(cap, name), **node_labels(cap)}.items())),
            taints=taints,
        )
        for name in node_names(cap)
    )
    return PoolNodes(
        name=pool.name,
        role=pool.role.value,
        gpu_model=cap.gpu.name,
        mode=decision.mode,
        nodes=nodes,
        mig_worth=_mig_worth(cap.gpu.mig, layout),
        replica_worth=Fraction(1, replicas),
    )


def fleet_nodes(fleet: Fleet, *, tainted: bool) -> dict[str, PoolNodes]:
    """Every pool's nodes, in policy order."""
    return {name: pool_nodes(cap, tainted=tainted) for name, cap in fleet.pools.items()}
