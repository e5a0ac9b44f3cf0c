"""Named pathologies of a simulated run: what went wrong, the evidence, and the policy change that
removes it.

Each ``Finding`` carries a PascalCase reason, one sentence a team lead understands (with the
numbers), the evidence (job names, the preemption chain, hours), the remedy in words and the policy
field paths it touches (``settings``). Paths read like the policy file: ``queueing.<field>``,
``teams[<team>].quota[<pool>].<field>``, ``pools[<pool>].slicing``, ``serving.deployments``,
``scheduling.nodeScoring`` (kube-scheduler's scoring; ``simulate --placement`` overrides it in a run).

- ``PreemptionLoop``: a job preempted ``LOOP_AT`` times or more; the chain of who preempted it and
  why (Kueue's reasons), and whom it preempted in turn. Reclamation one way and fair sharing the
  other is the cohort-reclaim loop Kueue's users report (kueue#13662).
- ``NeverAdmissible``: jobs larger than their team's reach on every pool offering their resource
  (nominal + what the limits let it borrow); they wait forever.
- ``QuotaWithoutNode``: jobs admitted that no node could place: waitForPodsReady evictions and the
  hours they held quota unplaced.
- ``IdleBehindLimits``: a pool's usable GPUs idle while a team's job waited only because a borrowing
  or lending limit stopped it.
- ``ServingStarvation``: wanted serving replicas without a GPU.
- ``SlicingMisfit``: a MIG or time-sliced pool idle while jobs that want its card wait for a shape
  its layout does not offer.

Findings are reported above a floor (``MIN_GPU_H`` GPU-hours, ``MIN_UNPLACED_H`` hours), so the
rounding of a short run does not name a pathology.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from gpufleet.policy import Fleet
from gpufleet.policy.capacity import limit_value
from gpufleet.policy.slicing import SlicingMode
from gpufleet.simulate.config import HOUR, Mode
from gpufleet.simulate.idle import demand_of
from gpufleet.simulate.jobs import JobRun
from gpufleet.simulate.measures import Measures
from gpufleet.simulate.reach import Reaches
from gpufleet.twin.apis.reasons import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
)

if TYPE_CHECKING:
    from gpufleet.simulate.result import RunResult

LOOP_AT = 4  # preemptions of one job that make a loop (the demo's bound is 3)
MIN_GPU_H = 1.0
MIN_UNPLACED_H = 1.0
EVIDENCE = 5  # lines of evidence per finding


class Reason(StrEnum):
    PREEMPTION_LOOP = "PreemptionLoop"
    NEVER_ADMISSIBLE = "NeverAdmissible"
    QUOTA_WITHOUT_NODE = "QuotaWithoutNode"
    IDLE_BEHIND_LIMITS = "IdleBehindLimits"
    SERVING_STARVATION = "ServingStarvation"
    SLICING_MISFIT = "SlicingMisfit"


@dataclass(frozen=True)
class Finding:
    reason: Reason
    message: str  # one sentence a team lead understands, with the numbers
    evidence: tuple[str, ...]  # e.g. the preemption chain, the job names, the hours
    remedy: str  # the policy change that removes it, in words
    settings: tuple[str, ...]  # policy field paths the remedy touches
    subjects: tuple[str, ...]  # teams / pools / jobs concerned

    def as_dict(self) -> dict[str, object]:
        return {
            "reason": self.reason.value,
            "message": self.message,
            "evidence": list(self.evidence),
            "remedy": self.remedy,
            "settings": list(self.settings),
            "subjects": list(self.subjects),
        }


def _h(seconds: float) -> str:
    return f"{seconds / HOUR:,.1f}"


def _short(resource: str) -> str:
    return resource.removeprefix("nvidia.com/")


def _units(amount: str, resource: str) -> str:
    """``8–16 GPUs``, ``4 mig-3g.40gb instances``, ``2 shared-GPU replicas``: counts as people say them."""
    if resource == "nvidia.com/gpu":
        return f"{amount} GPUs"
    if resource.startswith("nvidia.com/mig-"):
        return f"{amount} {_short(resource)} instances"
    return f"{amount} {_short(resource)} replicas"


def _limits_on(fleet: Fleet, pool: str) -> list[str]:
    """The limit settings the policy sets on ``pool`` (borrowing and lending, per team)."""
    out = []
    for team in fleet.policy.teams:
        quota = team.quota.get(pool)
        if quota is None:
            continue
        for name in ("borrowingLimit", "lendingLimit"):
            if limit_value(getattr(quota, name)) is not None:
                out.append(f"teams[{team.name}].quota[{pool}].{name}")
    return out


# --- PreemptionLoop ----------------------------------------------------------------------------------
_LOOP_SETTINGS = {
    # a lender's reclaim loops when a borrower takes what its victims free: the preemptor gate stops that
    IN_COHORT_RECLAMATION: ("queueing.reclaimWithinCohort", "queueing.prioritizePreemptorWorkloads"),
    IN_COHORT_RECLAIM_WHILE_BORROWING: (
        "queueing.borrowWithinCohort",
        "queueing.reclaimWithinCohort",
        "queueing.prioritizePreemptorWorkloads",
    ),
    IN_COHORT_FAIR_SHARING: ("queueing.preemptionStrategies", "queueing.fairSharing"),
    IN_CLUSTER_QUEUE: ("queueing.withinClusterQueue",),
}


def preemption_loops(runs: Sequence[JobRun], fleet: Fleet) -> list[Finding]:
    looping = sorted((r for r in runs if r.preemptions >= LOOP_AT), key=lambda r: (-r.preemptions, r.key))
    if not looping:
        return []
    team_of = {r.key: r.team for r in runs}
    victims_of: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)  # preemptor -> (victim team, reason)
    for r in runs:
        for a in r.attempts:
            if a.end_reason == "Preempted" and a.end_by:
                victims_of[a.end_by][(r.team, a.end_detail)] += 1
    reasons: Counter[str] = Counter()
    pools: set[str] = set()
    evidence: list[str] = []
    for r in looping:
        ended = [a for a in r.attempts if a.end_reason == "Preempted"]
        reasons.update(a.end_detail for a in ended)
        pools.update(a.flavor for a in ended if a.flavor)
        if len(evidence) < EVIDENCE:
            by = Counter((team_of.get(a.end_by, "?"), a.end_detail) for a in ended)
            chain = ", ".join(f"by {t} {n}× ({why})" for (t, why), n in by.most_common(3))
            back = victims_of.get(r.key, Counter())
            answer = ", ".join(f"{t} {n}× ({why})" for (t, why), n in back.most_common(3))
            unstarted = sum(1 for a in ended if a.started is None)
            waiting = f", {unstarted} of them before its pods ran" if unstarted else ""
            evidence.append(
                f"{r.key} ({r.team}, {r.job.priority_class or 'no priority class'}): preempted {r.preemptions}× "
                f"{chain}{waiting}; {_h(r.work_lost)} GPU-h lost"
                + (f"; it preempted in turn {answer}" if answer else "")
            )
    worst = looping[0]
    settings: list[str] = []
    for why, _ in reasons.most_common():
        settings += [s for s in _LOOP_SETTINGS.get(why, ()) if s not in settings]
    borrowers = sorted({r.team for r in looping})
    for pool in sorted(pools):
        for team in borrowers:
            path = f"teams[{team}].quota[{pool}].borrowingLimit"
            if path not in settings:
                settings.append(path)
    lost = sum(r.work_lost for r in looping)
    mix = ", ".join(f"{why} {n}" for why, n in reasons.most_common())
    message = (
        f"{len(looping)} job(s) were preempted {LOOP_AT} times or more (worst: {worst.key} of {worst.team}, "
        f"{worst.preemptions}×), losing {_h(lost)} GPU-h of work: Kueue's reasons {mix}"
    )
    if IN_COHORT_FAIR_SHARING in reasons and (
        IN_COHORT_RECLAMATION in reasons or IN_COHORT_RECLAIM_WHILE_BORROWING in reasons
    ):
        message += "; a borrower is reclaimed by a lender and preempts back by fair sharing (the cohort-reclaim loop)"
    moves = ["set queueing.reclaimWithinCohort to Never (lenders give up guaranteed reclaim)"]
    if IN_COHORT_RECLAMATION in reasons or IN_COHORT_RECLAIM_WHILE_BORROWING in reasons:
        moves.append(
            "turn queueing.prioritizePreemptorWorkloads on (reclaim kept, the reclaimer holds what its victims free)"
        )
    moves.append("set queueing.preemptionStrategies to [LessThanOrEqualToFinalShare]")
    if IN_COHORT_RECLAIM_WHILE_BORROWING in reasons:
        moves.append("set queueing.borrowWithinCohort to Never (no preempting while borrowing)")
    remedy = (
        f"Break the loop: {', '.join(moves)}, or cap the borrowers' borrowingLimit "
        f"on {', '.join(sorted(pools)) or 'the pool'} so they do not borrow what is reclaimed"
    )
    subjects = (*borrowers, *sorted(pools), *(r.key for r in looping[:EVIDENCE]))
    return [Finding(Reason.PREEMPTION_LOOP, message + ".", tuple(evidence), remedy, tuple(settings), subjects)]


# --- NeverAdmissible ---------------------------------------------------------------------------------
def never_admissible(runs: Sequence[JobRun], fleet: Fleet, reaches: Reaches) -> list[Finding]:
    groups: dict[tuple[str, str], list[JobRun]] = defaultdict(list)
    for r in runs:
        if r.never:
            groups[(r.team, r.ask.resource)].append(r)
    out = []
    for (team, resource), jobs in sorted(groups.items()):
        sizes = sorted({r.job.pods * r.ask.count for r in jobs})
        options = reaches.options(jobs[0].job, jobs[0].ask)
        best = max(options, key=lambda o: o.reach, default=None)
        if best is None:
            where = f"no pool {team} may use offers {_short(resource)}"
            settings: tuple[str, ...] = (f"teams[{team}].quota",)
        else:
            borrow = "∞" if best.borrowing_limit is None else str(best.borrowing_limit)
            where = (
                f"{team} can reach at most {best.reach} on {best.pool} ({best.nominal} nominal, borrowing limit "
                f"{borrow}, pool {best.capacity})"
            )
            settings = (
                f"teams[{team}].quota[{best.pool}].gpus",
                f"teams[{team}].quota[{best.pool}].borrowingLimit",
                *(s for s in _limits_on(fleet, best.pool) if s.endswith("lendingLimit")),
            )
        span = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"
        message = (
            f"{len(jobs)} {team} job(s) ask {_units(span, resource)} but {where}: they can never be admitted "
            "and wait forever."
        )
        evidence = tuple(
            f"{r.key}: {r.job.pods}×{r.ask.count} {_short(resource)}, submitted at {r.job.submit_s} s"
            for r in jobs[:EVIDENCE]
        )
        remedy = (
            f"Raise {team}'s reach to the largest job ({sizes[-1]}): more nominal quota or a higher borrowing limit "
            "(and no lending limits that keep it out), or split such jobs"
        )
        out.append(
            Finding(Reason.NEVER_ADMISSIBLE, message, evidence, remedy, settings, (team, *(r.key for r in jobs)))
        )
    return out


# --- QuotaWithoutNode --------------------------------------------------------------------------------
def quota_without_node(runs: Sequence[JobRun], end: int) -> list[Finding]:
    hit = [r for r in runs if r.requeues or r.unplaced(end) >= MIN_UNPLACED_H * HOUR]
    if not hit:
        return []
    evictions = sum(r.requeues for r in runs)
    unplaced = sum(r.unplaced(end) for r in runs)
    if not evictions and unplaced < MIN_UNPLACED_H * HOUR:
        return []
    hit.sort(key=lambda r: (-r.requeues, -r.unplaced(end), r.key))
    evidence = tuple(
        f"{r.key} ({r.team}, {r.job.pods}×{r.ask.count} {_short(r.ask.resource)}): {r.requeues} eviction(s), "
        f"{_h(r.unplaced(end))} h admitted unplaced; the scheduler: {_unschedulable(r)}"
        for r in hit[:EVIDENCE]
    )
    teams = sorted({r.team for r in hit})
    message = (
        f"{len(hit)} job(s) of {', '.join(teams)} got quota but no node could place all their pods: "
        f"{evictions} waitForPodsReady eviction(s), {_h(unplaced)} hours holding quota unplaced."
    )
    remedy = (
        "Quota the nodes cannot deliver: pack nodes so gangs find whole ones (scheduling.nodeScoring: "
        "MostAllocated, which render writes as a kube-scheduler profile), or keep quota below what the free "
        "nodes hold; a shorter waitForPodsReady timeout (queueing.waitForPodsReady.timeoutSeconds) hands the "
        "quota back sooner"
    )
    settings = ("scheduling.nodeScoring", "queueing.waitForPodsReady.timeoutSeconds")
    return [
        Finding(
            Reason.QUOTA_WITHOUT_NODE, message, evidence, remedy, settings, (*teams, *(r.key for r in hit[:EVIDENCE]))
        )
    ]


def _unschedulable(run: JobRun) -> str:
    said = [a.unschedulable for a in run.attempts if a.unschedulable]
    return said[-1] if said else "no word (its pods waited for preempted pods to end)"


# --- IdleBehindLimits, SlicingMisfit ------------------------------------------------------------------
def idle_behind_limits(result: RunResult, fleet: Fleet, window: tuple[int, int]) -> list[Finding]:
    meter = result.outcome.meter
    out = []
    for pool in result.outcome.pools:
        hours = meter.integral(f"limited:{pool}", *window) / HOUR
        settings = _limits_on(fleet, pool)
        if hours < MIN_GPU_H or not settings:
            continue
        held = {t.name: meter.integral(f"limited:{pool}:{t.name}", *window) / HOUR for t in fleet.policy.teams}
        waiting = sorted(((h, t) for t, h in held.items() if h >= MIN_GPU_H), reverse=True)
        who = ", ".join(f"{t} {h:,.1f}" for h, t in waiting)
        back = {t for _, t in waiting}
        if back:  # the limits that held these teams back: their own borrowing, the others' lending
            settings = [x for x in settings if (_team_of(x) in back) == x.endswith("borrowingLimit")] or settings
        limits = ", ".join(f"{_team_of(s)} {s.rsplit('.', 1)[1]} {_limit_setting(fleet, s)}" for s in settings)
        message = (
            f"{pool} had {hours:,.1f} GPU-h idle while jobs waited that only a borrowing or lending limit kept out "
            f"(GPU-h per team held back: {who or 'none above 1'}; limits: {limits})."
        )
        evidence = tuple(f"{s} = {_limit_setting(fleet, s)}" for s in settings) + tuple(
            f"{t}: {h:,.1f} GPU-h of {pool} idle while its jobs were over its reach" for h, t in waiting
        )
        teams = sorted({_team_of(s) for s in settings} | {t for _, t in waiting})
        remedy = (
            f"Lift or raise the limits on {pool} so idle cards can be borrowed (lenders still reclaim by preemption)"
        )
        out.append(Finding(Reason.IDLE_BEHIND_LIMITS, message, evidence, remedy, tuple(settings), (pool, *teams)))
    return out


def _team_of(path: str) -> str:
    return path.split("]", maxsplit=1)[0].removeprefix("teams[")


def _limit_setting(fleet: Fleet, path: str) -> str:
    team = path.split("]", maxsplit=1)[0].removeprefix("teams[")
    pool = path.split("quota[")[1].split("]", maxsplit=1)[0]
    field = path.rsplit(".", 1)[1]
    t = fleet.policy.team(team)
    quota = t.quota.get(pool) if t else None
    return str(getattr(quota, field)) if quota else "?"


def slicing_misfit(result: RunResult, fleet: Fleet, window: tuple[int, int]) -> list[Finding]:
    meter = result.outcome.meter
    out = []
    for name, pool in result.outcome.pools.items():
        if pool.mode is SlicingMode.FULL:
            continue
        hours = meter.integral(f"misfit:{name}", *window) / HOUR
        if hours < MIN_GPU_H:
            continue
        cap = fleet.pools[name]
        offered = set(cap.units)
        watch = result.outcome.watch
        wanted: Counter[str] = Counter()
        for r in result.outcome.runs:
            if watch is not None and r.waited(result.outcome.end) > 0 and watch.misfit(name, demand_of(r)):
                wanted[r.ask.resource] += 1
        asks = ", ".join(f"{n} job(s) asking {_units('', res).strip()}" for res, n in wanted.most_common(4))
        layout = cap.decision.layout_name or cap.decision.mode
        message = (
            f"{name} ({layout}) had {hours:,.1f} GPU-h idle while jobs waited for shapes it does not offer"
            + (f": {asks}" if asks else "")
            + "."
        )
        evidence = (
            f"{name} offers {', '.join(_short(u) for u in sorted(offered))}",
            *tuple(f"{_short(res)}: {n} waiting job(s)" for res, n in wanted.most_common(EVIDENCE - 1)),
        )
        remedy = f"Cut {name}'s cards in a layout the waiting jobs ask for (or whole cards)"
        out.append(Finding(Reason.SLICING_MISFIT, message, evidence, remedy, (f"pools[{name}].slicing",), (name,)))
    return out


# --- ServingStarvation -------------------------------------------------------------------------------
def serving_starvation(result: RunResult, fleet: Fleet, measures: Measures) -> list[Finding]:
    starved = measures.serving_starved_replica_min
    serving = fleet.policy.serving
    if starved <= 0 or serving is None:
        return []
    world = result.outcome.config.mode
    if world is Mode.FIRST_APPLY:
        why = "without the queue's taints, batch pods took the serving nodes"
        remedy = f"Put the queue in front: {serving.pool} tainted for serving only, batch work through Kueue"
        settings: tuple[str, ...] = (f"pools[{serving.pool}].taints", "serving.pool")
    else:
        why = f"{serving.pool} cannot hold every wanted replica"
        remedy = f"Give {serving.pool} room for the deployments' peak replicas, or fewer replicas"
        settings = (f"pools[{serving.pool}].nodes", "serving.deployments")
    message = f"The serving deployments lacked {starved:,.1f} replica-minutes of GPUs: {why}."
    evidence = (f"{len(serving.deployments)} deployment(s) on {serving.pool}; {starved:,.1f} replica-minutes starved",)
    return [Finding(Reason.SERVING_STARVATION, message, evidence, remedy, settings, (serving.pool,))]


def diagnose(result: RunResult, fleet: Fleet, measures: Measures) -> list[Finding]:
    """Every pathology of one run, over the measures' window (see the module's docstring)."""
    window = measures.window_s
    runs = [r for r in result.outcome.runs if window[0] <= r.job.submit_s < window[1]]
    out: list[Finding] = []
    queue_world = result.outcome.config.mode is Mode.QUEUE
    out += preemption_loops(runs, fleet)
    if queue_world:
        out += never_admissible(runs, fleet, Reaches(fleet))
        out += quota_without_node(runs, result.outcome.end)
        out += idle_behind_limits(result, fleet, window)
    out += serving_starvation(result, fleet, measures)
    out += slicing_misfit(result, fleet, window)
    return out
