"""Kueue v0.19.2: ``pkg/scheduler/preemption/common/types.go``,
``pkg/scheduler/preemption/preemption.go``.

A preemption target and the fit check every preemption search ends with (classic and fair)."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.twin.cache.cohort import ClusterQueue
from gpufleet.twin.cache.resource_node import available
from gpufleet.twin.workload import Workload


@dataclass(frozen=True, slots=True)
class Target:
    """A workload to evict so that a preemptor fits, and Kueue's reason for it."""

    workload: Workload
    reason: str


def workload_fits(request: dict[int, int], cq: ClusterQueue, allow_borrowing: bool) -> bool:
    """Whether ``request`` fits in ``cq`` now; without borrowing it must stay within its own quota."""
    node = cq.node
    for fr, v in request.items():
        if not allow_borrowing and node.usage[fr] + v > node.subtree[fr]:
            return False
        if v > available(node, fr):
            return False
    return True
