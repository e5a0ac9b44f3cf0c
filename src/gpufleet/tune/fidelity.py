"""Multi-fidelity trials: a trial's measures after each simulated rung, and successive halving on them.

One trial of the bundled example's week is minutes of CPU, and most sampled policies are plainly worse
after a day or two. So a trial runs its queue world in stages (``QueueWorld.advance`` pauses the same
run at an instant, the mechanism ``forecast`` branches from; the simulator is not changed) and, at each
rung, is measured over the window so far:

- **Exact pruning**: preemptions of one job, serving starvation, stranded jobs and lost guarantees only
  grow as the run goes on (the first two are counts and integrals over a window that grows; the last
  two are fixed by the policy, so they stop a trial before its run starts), so a trial that already
  breaks one of them can never be feasible: it stops there.
- **Successive halving** (Optuna's rule; written here because Optuna's pruners and ``Trial.report``
  refuse multi-objective studies: ``NotImplementedError``): at rung *i* a sampled trial goes on only
  when its score is among the best ``1/eta`` of the trials that reached that rung (at least
  ``min_peers`` of them, itself included; fewer: it goes on). The score is the recommendation's own
  order: the worst team's p95 wait so far (waits of jobs still waiting count up to the rung), then more
  goodput. Every trial records its rung scores as user attributes (``rung.<seconds>``) in the shared
  study, so workers in other processes or machines compare against the same peers.

The input (trial 0) and the reasoned candidates and simplifications are never halved: they are few and
chosen on purpose; their rung scores still count as peers. ``bench/tune_bench.py --fidelity`` measures
how well a rung's ranking predicts the whole run's (Spearman) to choose ``first_s``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from gpufleet.policy import Fleet
from gpufleet.simulate.config import Mode, SimulationConfig, for_policy
from gpufleet.simulate.measures import Measures, measure
from gpufleet.simulate.metrics import summarize
from gpufleet.simulate.queue_world import QueueWorld
from gpufleet.simulate.records import job_rows, ledger_records
from gpufleet.simulate.result import RunResult
from gpufleet.trace.job import Job
from gpufleet.tune.objectives import Constraints, worst_p95_s

DAY = 86_400
RUNG_PREFIX = "rung."
PRUNED_ATTR = "prunedAt"
HALVED = ("search",)  # the sources successive halving may stop

Score = tuple[float, float]  # (worst team p95 wait h, −goodput GPU-h): lower is better


@dataclass(frozen=True)
class Fidelity:
    """Rungs at ``first_s``, ``first_s·eta``, ``first_s·eta²``… from the window's start, before its end.

    ``halving`` off (``exact``): only the exact stops, at a rung every ``first_s``. Nothing is compared
    with other trials, so no trial that could be feasible is stopped and the recommendation is the
    one whole runs give; a trial that breaks a constraint for good (a preemption loop) stops at the
    next rung instead of running to the world's horizon."""

    first_s: int = DAY
    eta: int = 3
    min_peers: int = 3
    halving: bool = True

    @classmethod
    def exact(cls, every_s: int = DAY) -> Fidelity:
        return cls(first_s=every_s, halving=False)

    def rungs(self, window: tuple[int, int]) -> list[int]:
        start, stop = window
        out, step = [], self.first_s
        while start + step < stop and step > 0:
            out.append(start + step)
            step = step * self.eta if self.halving else step + self.first_s
        return out


def for_flags(rung_hours: float | None, whole_runs: bool = False) -> Fidelity | None:
    """``tune``'s choice: rungs from ``rung_hours`` with successive halving; ``whole_runs``: none (every
    trial to its end); otherwise the exact stops only, at each simulated day's end."""
    if rung_hours:
        return Fidelity(first_s=round(rung_hours * 3600))
    return None if whole_runs else Fidelity.exact()


def score(m: Measures) -> Score:
    return (round(worst_p95_s(m) / 3600, 3), -round(m.goodput_gpu_h, 3))


def fixed(c: Constraints, stranded: int, lost: int) -> list[str]:
    """The constraints the policy itself breaks (stranded jobs, lost guarantees): known before a run."""
    out = []
    if stranded > 0:
        out.append(f"stranded {stranded}")
    if c.keep_guarantees and lost > 0:
        out.append(f"guarantees {lost}")
    return out


def broken(m: Measures, c: Constraints, stranded: int, lost: int) -> list[str]:
    """The constraints a rung's measures already break for good (they never decrease as the run goes on)."""
    out = []
    if m.preemptions_max > c.max_preemptions:
        out.append(f"preemptions {m.preemptions_max} > {c.max_preemptions}")
    if m.serving_starved_replica_min > c.max_starved_replica_min:
        out.append(f"servingStarvation {m.serving_starved_replica_min:g} replica-min")
    return out + fixed(c, stranded, lost)


class Staged:
    """One queue-world run, paused at each rung; the finished run equals ``simulate``'s (deterministic)."""

    def __init__(self, fleet: Fleet, jobs: Sequence[Job], config: SimulationConfig) -> None:
        self.fleet = fleet
        self.config = for_policy(replace(config, mode=Mode.QUEUE), fleet.policy)
        self.world = QueueWorld(fleet, jobs, self.config)

    def at(self, through: int, window: tuple[int, int]) -> Measures:
        """Run every instant up to ``through`` and measure the window so far (to ``through``)."""
        if self.world.advance(through):
            self.world.meter.advance(through)  # nothing happens before the next instant: the level holds
        partial = RunResult(Mode.QUEUE.value, self.world.outcome(), {}, [], [])
        return measure(partial, self.fleet, (window[0], max(window[0], min(through, window[1]))))

    def finish(self) -> RunResult:
        self.world.advance()
        outcome = self.world.outcome()
        name = self.config.mode.value
        return RunResult(name, outcome, summarize(outcome), ledger_records(outcome, name), job_rows(outcome, name))

    def stages(self, rungs: Sequence[int], window: tuple[int, int]) -> Iterator[tuple[int, Measures]]:
        for at in rungs:
            yield at, self.at(at, window)


def promoted(mine: Score, peers: Sequence[Score], f: Fidelity) -> bool:
    """Successive halving at one rung: among the best ``ceil(n/eta)`` of the ``n`` trials there
    (``peers`` excludes this one; ties count in its favour), or too few trials to judge."""
    n = len(peers) + 1
    if n < f.min_peers:
        return True
    better = sum(1 for p in peers if p < mine)
    return better < math.ceil(n / f.eta)


def rung_key(at: int) -> str:
    return f"{RUNG_PREFIX}{at}"
