"""What a tuned policy must do (constraints) and what it should do better (objectives).

Both read only the simulation's ``Measures`` (and, for the guarantees, the policy itself), so a
trial's figures are the ones ``simulate`` would print for that policy. Objectives: goodput GPU-hours
up, the worst team's p95 wait down. Constraints, each an Optuna constraint value that is ``<= 0``
when met: no serving starvation, no job preempted more than ``max_preemptions`` times, Jain's
fairness at least ``min_jain``, no job stranded that first apply runs or the input admits and
some policy in the space could admit (``strand``), and with ``keep_guarantees`` every team can still take back the
nominal quota the input policy gives it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpufleet.policy import FleetPolicy
from gpufleet.policy.model import UNLIMITED
from gpufleet.simulate.measures import Measures

DIRECTIONS: tuple[Literal["maximize"], Literal["minimize"]] = ("maximize", "minimize")
OBJECTIVES = ("goodput GPU-h", "worst team p95 wait h")
CONSTRAINTS = ("servingStarvation", "preemptions", "jain", "stranded", "guarantees")  # the order of ``violations``


@dataclass(frozen=True)
class Constraints:
    max_preemptions: int = 3
    min_jain: float = 0.95
    max_starved_replica_min: float = 0.0
    keep_guarantees: bool = False

    @property
    def width(self) -> int:
        """How many values ``violations`` gives (``guarantees`` only with ``keep_guarantees``)."""
        return len(CONSTRAINTS) - (0 if self.keep_guarantees else 1)

    def describe(self) -> list[str]:
        rules = [
            f"serving starvation at most {self.max_starved_replica_min:g} replica-minutes",
            f"no job preempted more than {self.max_preemptions} times",
            f"Jain fairness at least {self.min_jain:g}",
            "no job that first apply runs or the input policy admits is stranded (never admissible)",
        ]
        if self.keep_guarantees:
            rules.append("every team can take back its nominal quota")
        return rules


def worst_p95_s(m: Measures) -> int:
    """The longest p95 wait of any team with jobs (0 when no team had one)."""
    return max((t.wait_p95_s for t in m.teams if t.wait_p95_s is not None), default=0)


def objectives(m: Measures) -> tuple[float, float]:
    """(goodput GPU-h, worst team p95 wait in hours), in ``DIRECTIONS``."""
    return (round(m.goodput_gpu_h, 3), round(worst_p95_s(m) / 3600, 3))


def lost_guarantees(base: FleetPolicy, policy: FleetPolicy) -> list[str]:
    """Team/pool pairs whose nominal quota (in ``base``) the team can no longer be sure to get back.

    A team is sure of its nominal quota when it lends none of it (lendingLimit 0) or can reclaim
    what it lent from any borrower (its ClusterQueue's reclaimWithinCohort, the team's own or the
    fleet's, is Any: Kueue's LowerPriority reclaims only from borrowers of lower priority, so a
    borrower of the same priority keeps the lent quota), and the nominal quota itself is unchanged.
    """
    lost = []
    for team in base.teams:
        tuned = policy.team(team.name)
        reclaim = tuned is not None and policy.preemption_of(tuned).reclaimWithinCohort == "Any"
        for pool, quota in team.quota.items():
            if (quota.gpus or 0) == 0 and not any(quota.mig.values()):
                continue
            now = tuned.quota.get(pool) if tuned else None
            same = now is not None and now.gpus == quota.gpus and now.mig == quota.mig
            lends = now is None or now.lendingLimit == UNLIMITED or int(now.lendingLimit) > 0
            if not same or (lends and not reclaim):
                lost.append(f"{team.name}/{pool}")
    return lost


def violations(m: Measures, c: Constraints, lost: int = 0, stranded: int = 0) -> tuple[float, ...]:
    """One value per constraint, ``<= 0`` when it is met (Optuna's ``constraints_func`` convention);
    ``stranded``: protected jobs the policy makes never-admissible (``strand.stranded_in``)."""
    jain = m.jain if m.jain is not None else 1.0
    values = [
        m.serving_starved_replica_min - c.max_starved_replica_min,
        float(m.preemptions_max - c.max_preemptions),
        round(c.min_jain - jain, 6),
        float(stranded),
    ]
    if c.keep_guarantees:
        values.append(float(lost))
    return tuple(values)


def feasible(values: tuple[float, ...] | list[float]) -> bool:
    return all(v <= 0 for v in values)
