"""What no knob in the search space can do, said with the evidence and the capacity that would.

"No trial met the constraints" does not tell a platform lead whether a better search would have found
one. Some constraints can be shown out of reach before any trial, from the policy alone:

- ``ServingPoolTooSmall``: at some hour the serving curve wants replicas the serving pool's nodes cannot
  all hold (an exact packing; no knob changes the serving pool), so replicas starve whatever the queue
  does (a lower bound on the starved replica-minutes, against the constraint's allowance).
- ``JobLargerThanAnyPool``, ``QuotaOutOfReach``, ``NoPoolForTeam``: jobs no policy in the space can
  admit (``strand.Beyond``): larger than every pool their team may use, larger than the most quota any
  setting of the limits gives the team, or of a resource no pool of the team offers. They do not block
  a recommendation (the stranding constraint counts only jobs a knob can save) but they never run.

When the search ran and no trial met the constraints without such a proof, ``nearest`` says, per
constraint, how close the best trial came (``NoTrialFeasible``): evidence, not a proof.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.policy import FleetPolicy, resolve
from gpufleet.simulate.config import HOUR, ServingCurve
from gpufleet.tune.objectives import CONSTRAINTS, Constraints
from gpufleet.tune.recommend import Candidate
from gpufleet.tune.strand import Beyond

MINUTE = 60
GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Infeasible:
    """One thing no knob can do: a machine reason, a human message, its evidence, what would fix it."""

    reason: str  # PascalCase
    constraint: str  # the constraint (``objectives.CONSTRAINTS``) it concerns
    blocks: bool  # True: no trial can meet the constraint, so nothing can be recommended
    message: str
    evidence: tuple[str, ...]
    needed: str  # the capacity (or setting) that would make it feasible

    def as_dict(self) -> dict[str, object]:
        return {
            "reason": self.reason,
            "constraint": self.constraint,
            "blocks": self.blocks,
            "message": self.message,
            "evidence": list(self.evidence),
            "needed": self.needed,
        }


PACKING_LIMIT = 50_000  # search steps before a packing is called unknown (then nothing is claimed)


def fits(sizes: Sequence[int], nodes: int, per_node: int) -> bool | None:
    """Whether replicas of these GPU sizes can all be placed on ``nodes`` nodes of ``per_node`` GPUs
    (exact, by search; None when the search runs past ``PACKING_LIMIT`` steps)."""
    order = sorted(sizes, reverse=True)
    if sum(order) > nodes * per_node or (order and order[0] > per_node):
        return False
    seen: set[tuple[int, tuple[int, ...]]] = set()
    steps = 0

    def place(i: int, free: tuple[int, ...]) -> bool | None:
        nonlocal steps
        if i == len(order):
            return True
        steps += 1
        if steps > PACKING_LIMIT:
            return None
        if (i, free) in seen:
            return False
        seen.add((i, free))
        unknown = False
        for j, room in enumerate(free):
            if room >= order[i] and (j == 0 or free[j - 1] != room):  # equal nodes are interchangeable
                left = tuple(sorted((*free[:j], room - order[i], *free[j + 1 :]), reverse=True))
                got = place(i + 1, left)
                if got:
                    return True
                unknown = unknown or got is None
        return None if unknown else False

    return place(0, tuple([per_node] * nodes))


def serving(
    policy: FleetPolicy, window: tuple[int, int], constraints: Constraints, curve: ServingCurve
) -> list[Infeasible]:
    """``ServingPoolTooSmall`` when, at some hours, the serving curve's replicas cannot all be placed on
    the serving pool's nodes, whatever the queue does (the policy's own check only compares totals, so
    a pool with room in sum but not per node passes it). No knob in the space changes the serving pool:
    at least one replica starves each such hour, a lower bound on the starved replica-minutes."""
    spec = policy.serving
    if spec is None or any(d.migProfile for d in spec.deployments):
        return []  # MIG replicas share cards by profile: not judged here
    cap = resolve(policy).pools[spec.pool]
    per_node = cap.units_per_node(GPU)
    nodes = cap.units.get(GPU, 0) // per_node if per_node else 0
    starved_min, short_hours = 0, []
    peak: list[int] = []
    for t in range(window[0] - window[0] % HOUR, window[1], HOUR):
        sizes = [d.gpusPerReplica or 1 for d in spec.deployments for _ in range(curve.wanted(d.replicas, t))]
        if fits(sizes, nodes, per_node) is False:
            starved_min += (min(t + HOUR, window[1]) - max(t, window[0])) // MINUTE
            short_hours.append((t // HOUR) % 24)
            peak = max(peak, sizes, key=sum)
    if not short_hours or starved_min <= constraints.max_starved_replica_min:
        return []
    more = next((k for k in range(1, 1 + len(peak)) if fits(peak, nodes + k, per_node)), len(peak))
    hours = sorted(set(short_hours))
    message = (
        f"at hours {hours[0]}–{hours[-1]} of the day the serving curve wants replicas of "
        f"{sorted(peak, reverse=True)} GPUs, which {nodes} node(s) of {per_node} GPUs in {spec.pool} cannot all hold: "
        f"at least {starved_min:,} replica-minutes starve whatever the queue does "
        f"(allowed: {constraints.max_starved_replica_min:g})"
    )
    evidence = tuple(
        f"{d.name}: up to {max(curve.wanted(d.replicas, h * HOUR) for h in range(24))} replica(s) × "
        f"{d.gpusPerReplica or 1} GPU"
        for d in spec.deployments
    )
    needed = (
        f"{more} more node(s) of {per_node} GPUs in {spec.pool} ({nodes} → {nodes + more}), or fewer serving replicas"
    )
    return [Infeasible("ServingPoolTooSmall", "servingStarvation", True, message, evidence, needed)]


def beyond(found: Sequence[Beyond]) -> list[Infeasible]:
    """The jobs no policy in the space admits, each group with the capacity that would."""
    out = []
    for b in found:
        reason = (
            "NoPoolForTeam"
            if b.pool is None
            else "JobLargerThanAnyPool"
            if b.capacity < b.largest
            else "QuotaOutOfReach"
        )
        evidence = tuple(b.jobs[:5]) + ((f"… and {len(b.jobs) - 5} more",) if len(b.jobs) > 5 else ())
        out.append(Infeasible(reason, "stranded", False, b.message(), evidence, b.needed))
    return out


def nearest(trials: Sequence[Candidate], constraints: Constraints) -> Infeasible:
    """``NoTrialFeasible``: for each constraint, the best any trial did (evidence that the search found
    nothing, not a proof that nothing exists)."""
    names = CONSTRAINTS if constraints.keep_guarantees else CONSTRAINTS[:-1]
    evidence = []
    for i, name in enumerate(names):
        values = [(c.constraints[i], c.number) for c in trials if i < len(c.constraints)]
        if not values:
            continue
        best, number = min(values)
        state = "met" if best <= 0 else f"missed by {best:g} at best"
        evidence.append(f"{name}: {state} (trial {number}); met by {sum(v <= 0 for v, _ in values)} of {len(values)}")
    failing = [e.split(":")[0] for e in evidence if "missed" in e]
    message = (
        f"no trial of {len(trials)} met every constraint; "
        + (f"never met: {', '.join(failing)}" if failing else "each was met by some trial, never all at once")
        + " (no proof that no policy in the space can)"
    )
    return Infeasible(
        "NoTrialFeasible", ",".join(failing), False, message, tuple(evidence), "more trials, or looser constraints"
    )
