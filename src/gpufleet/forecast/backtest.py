"""How well the forecast holds on a given trace and policy: ``gpufleet backtest``.

The calibration of docs/forecast.md is measured on the project's own synthetic weeks. Whether the
interval is worth trusting on *a* cluster is a question of that cluster's work: its teams, its
runtimes, how deep its queues run. So the same measurement runs on any trace, a cluster's own
history included (``trace convert --from-ledger`` or ``--from-prometheus``): the trace is simulated
once under the policy, the run the forecasts are judged against; at seeded random moments of it
every waiting workload is forecast from what was known then (``calibration.checks_at``: the state
and the ledger as of the moment, no later arrival, no unfinished job's true runtime) and compared
with the run's own admission. Every figure is of the simulated run, and the document says so.

The moments are drawn after a first stretch of the trace (``skip_s``: the forecast needs finished
runs to draw from) and by its last submission. The checks of one moment move together, so the
coverage comes with its interval over moments (``calibration.over_moments``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.durations import human
from gpufleet.errors import InputError
from gpufleet.forecast.calibration import (
    Check,
    Row,
    by_band,
    censored_line,
    checks_at,
    final_line,
    misses,
    moments,
    row,
    spread_line,
    summarize,
)
from gpufleet.forecast.estimate import Settings
from gpufleet.policy import Fleet
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.engine import Progress
from gpufleet.simulate.run import simulate
from gpufleet.trace.job import Job

SCHEMA = "gpufleet.io/forecast-backtest/v1"
#: A moment's progress: (moments done, moments in all).
MomentProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class Backtest:
    """The checks of every moment, and what they were made with."""

    moments: tuple[int, ...]
    checks: tuple[Check, ...]
    samples: int
    horizon_s: int
    seed: int
    jobs: int
    never: int  # jobs the policy can never admit: no forecast, so no check (``gpufleet simulate`` says why)


def moments_of(jobs: Sequence[Job], count: int, seed: int, skip_s: int) -> list[int]:
    """``count`` seeded moments after the trace's first ``skip_s`` seconds and by its last submission;
    a moment drawn twice is judged once (fewer moments, never a moment's checks counted twice)."""
    if not jobs:
        raise InputError.one("the trace holds no job: there is nothing to forecast", path="--trace")
    first, last = min(j.submit_s for j in jobs), max(j.submit_s for j in jobs)
    start = first + skip_s
    if start >= last:
        raise InputError.one(
            f"the trace's jobs arrive from {first} s to {last} s ({human(first)} to {human(last)}), so "
            f"nothing is left after the first {human(skip_s)}: give a shorter --skip (the forecast needs "
            f"finished runs before its moments) or a longer trace",
            path="--skip",
        )
    return sorted(set(moments(seed, count, start, last + 1)))


def backtest(
    fleet: Fleet,
    jobs: Sequence[Job],
    ats: Sequence[int],
    *,
    settings: Settings,
    config: SimulationConfig,
    on_arrival: Progress | None = None,
    on_moment: MomentProgress | None = None,
) -> Backtest:
    """Simulate ``jobs`` once, then forecast every workload waiting at each of ``ats`` against it."""
    truth = simulate(fleet, jobs, config, on_arrival)
    checks: list[Check] = []
    for done, at in enumerate(ats, 1):
        checks += checks_at(fleet, jobs, truth.outcome, truth.records, at, settings=settings, config=config)
        if on_moment is not None:
            on_moment(done, len(ats))
    never = sum(r.never for r in truth.outcome.runs)
    return Backtest(tuple(ats), tuple(checks), settings.samples, settings.horizon_s, settings.seed, len(jobs), never)


def per_moment(bt: Backtest) -> list[tuple[Row, int, int]]:
    """Each moment's row (labelled by its second), and its checks admitted after p90 and before p10."""
    out = []
    for at in bt.moments:
        here = [c for c in bt.checks if c.at == at]
        out.append((row(str(at), here), sum(c.early for c in here), sum(c.late for c in here)))
    return out


def _share(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 4)


def row_document(r: Row) -> dict[str, Any]:
    return {
        "label": r.label,
        "admissions": r.admissions,
        "coverage": _share(r.coverage),
        "overMoments": None if math.isnan(r.low) else [_share(r.low), _share(r.high)],
        "moments": r.moments,
        "medianError": None if math.isnan(r.median_error) or math.isinf(r.median_error) else _share(r.median_error),
        "censored": r.censored,
    }


def document(bt: Backtest, trace: str, policy: str) -> dict[str, Any]:
    """``gpufleet backtest --json``: every figure is of the simulated run (``simulated``)."""
    total = row("all", bt.checks)
    return {
        "schema": SCHEMA,
        "simulated": True,
        "policy": policy,
        "trace": trace,
        "jobs": bt.jobs,
        "neverAdmissible": bt.never,
        "samples": bt.samples,
        "seed": bt.seed,
        "horizonSeconds": bt.horizon_s,
        "all": {
            **row_document(total),
            "early": sum(c.early for c in bt.checks),
            "late": sum(c.late for c in bt.checks),
        },
        "moments": [
            {**row_document(r), "atSeconds": int(r.label), "early": e, "late": la} for r, e, la in per_moment(bt)
        ],
        "teams": [row_document(r) for r in summarize(bt.checks, lambda c: c.team)],
        "waits": [row_document(r) for r in by_band(bt.checks)],
        "said": [
            *(
                [
                    f"{bt.never} of the trace's jobs can never be admitted under the policy: no forecast, no check "
                    "(gpufleet simulate says why)"
                ]
                if bt.never
                else []
            ),
            f"missed: {misses(bt.checks)}",
            censored_line(bt.checks, bt.horizon_s),
            spread_line(bt.checks),
        ],
        "line": final_line(bt.checks, "simulated"),
    }
