"""Ours, not Kueue's: a fast path, off with ``Twin(spec, fast=False)`` (see ``fastpath/__init__.py``).

The verdict memo: a head's flavor assignment and preemption targets, remembered until quota
changes (the fast path; ``Twin(spec, fast=False)`` works every verdict out afresh).

The verdict depends on the workload only through its pod sets and priority (and its timestamp
where ``withinClusterQueue: LowerOrNewerEqualPriority`` compares it), and on the tree only
through admitted usage, reservation times and evicted flags, which change only where the twin
reserves or releases quota or marks a victim evicted; those call ``clear``. Cycles that admit
nothing while BestEffortFIFO queues try look-alike heads then cost a dictionary look-up each.

What later readers derive from a verdict (the fair-sharing tournament's standing of its queue
with the usage added, a quiet cycle's part) lives on the ``Verdict`` beside it, valid as long as
the verdict is: remembered, they are remembered together and dropped together.
"""

from __future__ import annotations

from collections.abc import Callable

from gpufleet.twin.apis.specs import LOWER_OR_NEWER_EQUAL_PRIORITY
from gpufleet.twin.cache.cohort import ClusterQueue
from gpufleet.twin.scheduler.assignments import Assign
from gpufleet.twin.scheduler.cycle import Verdict
from gpufleet.twin.workload import Workload


class VerdictMemo:
    """Verdicts by look-alike class (the reference path, ``scheduler/assignments.FreshVerdicts``,
    works every one out afresh)."""

    __slots__ = ("_assign", "_shapes", "_verdicts", "also")

    def __init__(self, assign: Assign, *, also: Callable[[], None] | None = None) -> None:
        self._assign = assign
        # What else lives exactly as long as the verdicts (the preemptor's per-quota-state bounds):
        # dropped with them on every ``clear``.
        self.also = also
        self._verdicts: dict[tuple[str, int], Verdict] = {}
        # Look-alike heads share one key object: one tuple per class, not one per workload.
        self._shapes: dict[tuple[object, ...], tuple[str, int]] = {}

    def get(self, wl: Workload, cq: ClusterQueue) -> Verdict:
        key = wl.shape
        if key is None or key[0] != cq.name:
            key = self.shape(wl, cq)
        found = self._verdicts.get(key)
        if found is None:
            found = self._verdicts[key] = Verdict(*self._assign(wl, cq))
        return found

    def shape(self, wl: Workload, cq: ClusterQueue) -> tuple[str, int]:
        """The memo key, numbered once per workload: hashing its pod sets on every look-up costs
        more than the look-up."""
        shape = wl.shape
        if shape is None or shape[0] != cq.name:
            newer_equal = cq.spec.preemption.within_cluster_queue == LOWER_OR_NEWER_EQUAL_PRIORITY
            kind = (wl.pod_sets, wl.priority) if wl.looks is None else wl.looks  # never equal: int, tuple
            looks = (cq.name, kind, wl.created if newer_equal else 0)
            shape = self._shapes.get(looks)
            if shape is None:
                shape = self._shapes[looks] = (cq.name, len(self._shapes))
            wl.shape = shape
        return shape

    def clear(self) -> None:
        """Quota, a reservation time or an evicted flag changed: every verdict may differ."""
        if self._verdicts:
            self._verdicts.clear()
        if self.also is not None:
            self.also()
