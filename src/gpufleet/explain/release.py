"""What would let a pending Workload in: which running Workloads' ends suffice, and which
preemption settings would make room. Each answer is the twin's own, run on a copy of the cluster.

Kueue knows no runtimes, so the order in which running Workloads will end is not knowable from
the cluster; what is knowable is which sets of ends suffice. The search tries sets smallest
first, skips supersets of a set already found, and stops after ``MAX_TRIALS`` twin runs, saying
so. It runs the whole queue, so a set whose freed quota a higher-priority Workload would take
first does not count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations

from gpufleet.explain.live import with_cluster_queue
from gpufleet.twin import Twin
from gpufleet.twin.apis.specs import ANY, LOWER_PRIORITY, NEVER, ClusterSpec

MAX_TRIALS = 128
MAX_SET = 4


@dataclass(frozen=True)
class Outcome:
    """What the twin did for the target after a change: admitted (in which cycle) and whom it preempted."""

    admitted_in: int | None
    preempts: tuple[str, ...]


@dataclass(frozen=True)
class EndsSearch:
    sets: tuple[tuple[str, ...], ...]  # minimal sets of running Workloads whose ends admit the target
    trials: int
    complete: bool  # every subset of the candidates was considered
    candidates: tuple[str, ...]


@dataclass(frozen=True)
class Alternative:
    """One preemption setting of the target's ClusterQueue and what the twin did under it."""

    change: dict[str, str]
    outcome: Outcome


def outcome(twin: Twin, target: str) -> Outcome:
    """Run ``twin`` until stable and report the target's fate."""
    preempts: list[str] = []
    for result in twin.run():
        preempts += [p.workload for p in result.preempted if p.preemptor == target]
        if any(a.workload == target for a in result.admitted):
            return Outcome(result.number, tuple(sorted(set(preempts))))
    return Outcome(None, tuple(sorted(set(preempts))))


def after_ends(spec: ClusterSpec, target: str, ends: Sequence[str]) -> Outcome:
    twin = Twin(spec)
    for key in ends:
        twin.finish(key)
    return outcome(twin, target)


def search_ends(spec: ClusterSpec, target: str, candidates: Sequence[str]) -> EndsSearch:
    """Minimal sets of ``candidates`` whose ends get ``target`` admitted, smallest first."""
    cands = tuple(candidates)
    if not cands or after_ends(spec, target, cands).admitted_in is None:
        return EndsSearch((), 1 if cands else 0, True, cands)
    found: list[tuple[str, ...]] = []
    trials = 1
    for size in range(1, min(len(cands), MAX_SET) + 1):
        for combo in combinations(cands, size):
            if any(set(f) <= set(combo) for f in found):
                continue
            if trials >= MAX_TRIALS:
                return EndsSearch(tuple(found), trials, False, cands)
            trials += 1
            if after_ends(spec, target, combo).admitted_in is not None:
                found.append(combo)
    if not found:  # only all of them together (more than MAX_SET) suffice
        found.append(cands)
    return EndsSearch(tuple(found), trials, len(cands) <= MAX_SET, cands)


def alternatives(spec: ClusterSpec, target: str, cq_name: str) -> list[Alternative]:
    """The target's ClusterQueue with preemption turned up, one setting at a time, then both."""
    cq = spec.cluster_queues[cq_name]
    p = cq.preemption
    changes: list[dict[str, str]] = []
    if p.within_cluster_queue == NEVER:
        changes.append({"withinClusterQueue": LOWER_PRIORITY})
    if p.reclaim_within_cohort != ANY and cq.cohort is not None:
        changes.append({"reclaimWithinCohort": ANY})
    if len(changes) == 2:
        changes.append({**changes[0], **changes[1]})
    out = []
    for change in changes:
        pre = replace(
            p,
            within_cluster_queue=change.get("withinClusterQueue", p.within_cluster_queue),
            reclaim_within_cohort=change.get("reclaimWithinCohort", p.reclaim_within_cohort),
        )
        changed = with_cluster_queue(spec, replace(cq, preemption=pre))
        out.append(Alternative(change, outcome(Twin(changed), target)))
    return out
