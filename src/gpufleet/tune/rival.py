"""A candidate against first apply on one held-out week: does it beat the fleet before gpufleet?

Issue 33's goal for a recommendation is that on every held-out week it beats first apply on goodput and
on every team's p95 wait. Meeting the constraints (``judge``) does not say that, so each held-out
verdict carries this comparison, and the held-out judging prefers, among the candidates that meet the
constraints, the one that beats first apply on the most weeks (``preference``).

**Goodput: a tie counts.** Every world is measured over the common window, which ends when the first
world is done (``measures.common_window``). When that world is first apply and it finished every job of
the window, its goodput is all the work there was: no world can count more, so matching it (finishing
every job by first apply's end) is the best any policy can do, and "beats" means "at least as much".
``first_done`` records that case, so a report can say the ceiling was reached or missed, not "lost".

**Why first apply can be hard to match**: it places pods on any GPU node, the serving pool's included,
and pays for it in serving starvation; no queue policy in the search space gives training the serving
pool (the starvation constraint forbids what first apply does). ``first_on_serving_gpu_h`` is the goodput
first apply ran there, the capacity the tuned world does not have. All figures simulated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.policy import Fleet
from gpufleet.policy.node_shape import node_names
from gpufleet.simulate.config import HOUR
from gpufleet.simulate.jobs import State
from gpufleet.simulate.measures import Measures, split
from gpufleet.simulate.result import RunResult


@dataclass(frozen=True)
class Slower:
    """A team whose p95 wait is longer under the candidate than under first apply."""

    team: str
    tuned_s: int
    first_s: int


@dataclass(frozen=True)
class Rival:
    """One candidate against first apply on one held-out week (every figure simulated)."""

    week: str
    goodput_gpu_h: float  # the candidate's, over the week's window
    first_goodput_gpu_h: float
    slower: tuple[Slower, ...]  # teams waiting longer at p95 than under first apply, in team order
    first_done: bool = False  # first apply finished every job of the window: its goodput is the ceiling
    first_on_serving_gpu_h: float = 0.0  # goodput first apply ran on the serving pool's nodes

    @property
    def gap_gpu_h(self) -> float:
        """The candidate's goodput minus first apply's (negative: short of it)."""
        return round(self.goodput_gpu_h - self.first_goodput_gpu_h, 3)

    @property
    def beats(self) -> bool:
        """At least first apply's goodput (a tie counts, see the module's docstring) and no team's p95 longer."""
        return self.gap_gpu_h >= 0 and not self.slower

    def describe(self) -> str:
        """``seed 5772: goodput 2,027 vs first apply 2,275 (−248; …); vision p95 32.8 h vs 15.8 h``."""
        word = "beats first apply" if self.beats else "short of first apply"
        good = f"goodput {self.goodput_gpu_h:,.0f} vs first apply {self.first_goodput_gpu_h:,.0f} ({_signed(self.gap_gpu_h)}"
        if self.first_done:
            good += ", first apply finished every job by the window's end: its goodput is the most any world counts"
        if self.first_on_serving_gpu_h > 0:
            off = self.first_goodput_gpu_h - self.first_on_serving_gpu_h
            good += f"; it ran {self.first_on_serving_gpu_h:,.0f} GPU-h of it on the serving pool, {off:,.0f} off it"
        good += ")"
        waits = [
            f"{s.team} p95 {s.tuned_s / HOUR:.1f} h vs {s.first_s / HOUR:.1f} h (+{s.tuned_s - s.first_s:,} s)"
            for s in self.slower
        ]
        return f"{self.week}: {word}: " + "; ".join([good, *waits])


def _signed(gpu_h: float) -> str:
    """A goodput gap as printed: whole GPU-hours, or three decimals below one (a queue world pays Kueue's
    admission seconds, so a near tie is a small negative gap, never to be shown as -0)."""
    return f"{gpu_h:+,.0f}" if abs(gpu_h) >= 1 else f"{gpu_h:+.3f}"


def against(
    week: str, first: Measures, tuned: Measures, *, first_done: bool = False, first_on_serving_gpu_h: float = 0.0
) -> Rival:
    """The candidate's measures (``tuned``) against first apply's on one week (the same window)."""
    slower = []
    for t in tuned.teams:
        theirs = first.team(t.team)
        if t.wait_p95_s is None or theirs is None or theirs.wait_p95_s is None:
            continue  # a team with no countable job in one world: nothing to compare
        if t.wait_p95_s > theirs.wait_p95_s:
            slower.append(Slower(t.team, t.wait_p95_s, theirs.wait_p95_s))
    return Rival(week, tuned.goodput_gpu_h, first.goodput_gpu_h, tuple(slower), first_done, first_on_serving_gpu_h)


def finished_all(result: RunResult, window: tuple[int, int]) -> bool:
    """Every job submitted in the window finished by its end (then the run's goodput is all their work)."""
    runs = [r for r in result.outcome.runs if window[0] <= r.job.submit_s < window[1]]
    return result.outcome.end <= window[1] and all(r.state is State.FINISHED for r in runs)


def on_serving_gpu_h(result: RunResult, fleet: Fleet, window: tuple[int, int]) -> float:
    """Goodput (GPU-h, within the window) of jobs whose finished run had a pod on the serving pool's nodes."""
    serving = fleet.policy.serving
    cap = fleet.pools.get(serving.pool) if serving is not None else None
    if cap is None:
        return 0.0
    nodes = set(node_names(cap))
    good = 0.0
    for r in result.outcome.runs:
        done = [a for a in r.attempts if a.end_reason == "Finished"]
        if any(node in nodes for a in done for node, _ in a.placements.values()):
            good += split(r, result.outcome.end, window).good
    return round(good / HOUR, 3)


def preference(holds: bool, rivals: Sequence[Rival], order: int) -> tuple[int, int, float, float, int]:
    """Sort key among judged candidates (smaller first): meets the constraints on every held-out week,
    then beats first apply on more weeks, then the smaller goodput shortfall summed over the weeks, then
    the fewer p95 hours over first apply's summed over weeks and teams, then the judging order (the
    recommendation's own order, ``recommend.ranked``): the final tie-breaker."""
    short = sum(max(0.0, -r.gap_gpu_h) for r in rivals)
    over = sum((s.tuned_s - s.first_s) / HOUR for r in rivals for s in r.slower)
    return (0 if holds else 1, -sum(r.beats for r in rivals), round(short, 3), round(over, 3), order)
