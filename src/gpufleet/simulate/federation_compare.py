"""The fleet owner's two questions about a federation, answered by simulating the same trace twice.

- **What residency costs in waits**: the policy as declared against the same policy with residency
  lifted (every data class may run on every cluster; the zones, quotas, pools and dispatcher stay).
  The difference per team is what keeping data where it must live costs that team on this trace.
- **One cluster or two**: the federation against the same pools merged into one cluster (one Kueue,
  one cohort, no manager, no dispatch: the policy narrowed to every cluster, ``residency.project``).
  One cluster cannot keep a data class to some of its pools, so the merged fleet has no residency
  either; the difference is what the split (and the residency it carries) costs, or saves.

Both sides of each question are real runs of the simulator (``federated_run``, ``run.simulate``),
measured with the one-cluster measures over one window; every figure says ``basis: simulated``.
Teams are listed in policy order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpufleet.errors import InputError
from gpufleet.policy import Fleet, FleetPolicy
from gpufleet.policy.checks import cross_check
from gpufleet.policy.fleet import resolve
from gpufleet.policy.residency import project
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.federation_run import federated_run
from gpufleet.simulate.measures import Measures, common_window, measure
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import simulate
from gpufleet.trace.job import Job

BASIS = "simulated"
RESIDENCY = "residency"  # the question's machine name: as declared vs residency lifted
CLUSTERS = "clusters"  # federated vs one merged cluster


def lifted(policy: FleetPolicy) -> FleetPolicy:
    """``policy`` with every data class allowed on every cluster (validated as any policy is)."""
    data = policy.model_dump(mode="python", exclude_unset=True)
    every = [c.name for c in policy.clusters]
    for dc in data.get("dataClasses", []):
        dc["clusters"], dc["regions"] = list(every), []
    return _valid(FleetPolicy.model_validate(data), "residency lifted")


def merged(policy: FleetPolicy) -> FleetPolicy:
    """``policy``'s pools, teams and quotas as one cluster: no ``clusters:``, no residency zones."""
    return _valid(project(policy, {c.name for c in policy.clusters}), "merged into one cluster")


def _valid(policy: FleetPolicy, what: str) -> FleetPolicy:
    problems = cross_check(policy)
    if problems:
        detail = "; ".join(f"{'.'.join(map(str, loc))}: {msg}" for loc, msg in problems)
        raise InputError.one(f"the policy {what} is not a valid policy: {detail}", path="clusters")
    return policy


@dataclass(frozen=True)
class TeamRow:
    team: str
    wait_p95_s: tuple[int | None, int | None]  # (as run, the alternative)
    goodput_gpu_h: tuple[float, float]
    never_admissible: tuple[int, int]  # left out of the waits (``measures``): the alternative may admit them


@dataclass(frozen=True)
class Comparison:
    """One question: the policy as run against its alternative, over one window."""

    question: str  # RESIDENCY or CLUSTERS
    names: tuple[str, str]  # how the two worlds are called
    window: tuple[int, int]
    measures: tuple[Measures, Measures]

    @property
    def teams(self) -> list[TeamRow]:
        mine, other = self.measures
        rows = []
        for t in mine.teams:
            o = other.team(t.team)
            rows.append(
                TeamRow(
                    t.team,
                    (t.wait_p95_s, None if o is None else o.wait_p95_s),
                    (t.goodput_gpu_h, 0.0 if o is None else o.goodput_gpu_h),
                    (t.never_admissible, 0 if o is None else o.never_admissible),
                )
            )
        return rows

    def as_dict(self) -> dict[str, Any]:
        a, b = self.names
        return {
            "basis": BASIS,
            "question": self.question,
            "worlds": [a, b],
            "windowSeconds": list(self.window),
            "goodputGpuHours": {a: self.measures[0].goodput_gpu_h, b: self.measures[1].goodput_gpu_h},
            "teams": {
                r.team: {
                    "p95WaitSeconds": {a: r.wait_p95_s[0], b: r.wait_p95_s[1]},
                    "goodputGpuHours": {a: r.goodput_gpu_h[0], b: r.goodput_gpu_h[1]},
                    "neverAdmissible": {a: r.never_admissible[0], b: r.never_admissible[1]},
                }
                for r in self.teams
            },
        }


def _pair(
    question: str, names: tuple[str, str], runs: tuple[RunResult, RunResult], fleets: tuple[Fleet, Fleet],
    window: tuple[int, int] | None,
) -> Comparison:  # fmt: skip
    span = window or common_window(list(runs))
    return Comparison(question, names, span, (measure(runs[0], fleets[0], span), measure(runs[1], fleets[1], span)))


def fleet_questions(
    fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig, *, window: tuple[int, int] | None = None,
    declared: RunResult | None = None,
) -> tuple[Comparison, Comparison]:  # fmt: skip
    """Residency's cost and one cluster against the federation, on ``jobs``; ``declared`` reuses the
    federation's own run when the caller has it (the simulator is deterministic: the same figures)."""
    if not fleet.policy.clusters:
        raise InputError.one("the policy declares no clusters: there is no federation to compare", path="clusters")
    as_run = declared if declared is not None else federated_run(fleet, jobs, config, "federated")[0]
    return (
        ask(RESIDENCY, fleet, jobs, config, window=window, declared=as_run),
        ask(CLUSTERS, fleet, jobs, config, window=window, declared=as_run),
    )


def ask(
    question: str, fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig, *,
    window: tuple[int, int] | None = None, declared: RunResult | None = None,
) -> Comparison:  # fmt: skip
    """One question (``RESIDENCY`` or ``CLUSTERS``): the federation's run against its alternative's."""
    as_run = declared if declared is not None else federated_run(fleet, jobs, config, "federated")[0]
    if question == RESIDENCY:
        free = resolve(lifted(fleet.policy))
        free_run = federated_run(free, jobs, config, "residency lifted")[0]
        return _pair(RESIDENCY, ("as declared", "residency lifted"), (as_run, free_run), (fleet, free), window)
    one = resolve(merged(fleet.policy))
    one_run = simulate(one, jobs, replace(config, mode=Mode.QUEUE))
    return _pair(CLUSTERS, ("federated", "one cluster"), (as_run, one_run), (fleet, one), window)
