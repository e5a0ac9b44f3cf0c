"""Kueue v0.19.2: ``pkg/controller/core/workload_controller.go``, ``pkg/scheduler/scheduler.go``.

What each workload without quota says: Kueue's latest verdict for it where Kueue wrote one, and
the twin's own words (marked ``kueue_writes=False``) where Kueue writes nothing: a workload it has
not popped yet, or an equivalent the scheduling hash moved in bulk."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gpufleet.twin.apis.reasons import SUSPENDED, cluster_queue_inactive
from gpufleet.twin.queue.equivalence import bypassed
from gpufleet.twin.results import ACTIVE, INADMISSIBLE, Pending, waiting_position

if TYPE_CHECKING:
    from gpufleet.twin.cache.cohort import CohortTree
    from gpufleet.twin.queue.queues import Queues
    from gpufleet.twin.workload import Workload


def of(queues: Queues, tree: CohortTree, last_status: dict[str, Pending], held: dict[str, Workload]) -> list[Pending]:
    """Every workload without quota, with its latest verdict (``Pending`` if never considered),
    sorted by workload: ``last_status`` holds the verdicts written, ``held`` the evicted workloads
    still holding quota."""
    result = []
    for name, queue in queues.by_cq.items():
        cq = tree.cluster_queues[name]
        head = None
        for position, wl in enumerate(queue.in_order(), start=1):
            known = last_status.get(wl.key)
            state = ACTIVE if queue.is_active(wl) else INADMISSIBLE
            head = head or wl.key
            moved = queue.bypassed(wl)
            if moved is not None:  # parked with an equivalent's failure: Kueue writes nothing
                result.append(bypassed(wl, moved, known))
            elif known is not None:
                result.append(replace(known, cluster_queue=name, queue=state))
            elif not cq.active:
                stopped = cq.spec.stop_policy != "None"  # Kueue's workload controller writes only then
                result.append(Pending(wl.key, name, SUSPENDED, cluster_queue_inactive(name), state, stopped))
            else:
                behind = head if queue.strict and head != wl.key else None
                result.append(waiting_position(wl.key, name, position, state, behind))
    orphans = [p for key, p in last_status.items() if p.cluster_queue not in queues.by_cq or key in held]
    return sorted(result + orphans, key=lambda p: p.workload)
