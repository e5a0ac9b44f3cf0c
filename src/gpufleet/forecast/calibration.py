"""How good the forecasts are: at moments of a simulated run, forecast every waiting workload from
what was known then, and compare with when the same run admitted it.

A check is *covered* when the admission fell inside the 80 % interval (p10–p90; a p90 "not within
the run" is unbounded above, and a workload the run never admitted is covered only by such an
interval). An admission later than the forecast's horizon counts as "not within the horizon",
which only an interval open above covers. The error is |p50 − actual| relative to the actual remaining wait (at least
``MIN_WAIT_S``, so a workload admitted the next second does not turn a few seconds into 1000 %; a
compressed trace, as the testbed runs, scales that floor with its time: ``Check.min_wait_s``).
Wait bands are of the actual remaining wait.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpufleet.forecast.estimate import Settings, admission, forecast
from gpufleet.forecast.simulated import moment_at
from gpufleet.ledger.records import Record
from gpufleet.policy import Fleet
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.outcome import Outcome
from gpufleet.trace.job import Job

MIN_WAIT_S = 60
BANDS = ((600, "< 10 min"), (3600, "10 min – 1 h"), (6 * 3600, "1 h – 6 h"), (math.inf, "≥ 6 h"))
AFTER = "after the horizon"  # admitted later than the forecast looks, or never


@dataclass(frozen=True)
class Check:
    workload: str
    team: str
    at: int
    p10: float
    p50: float
    p90: float  # inf: not within the horizon
    actual: float  # seconds from the moment to the admission; inf: never admitted in the run
    min_wait_s: float = MIN_WAIT_S  # the error's floor of the wait (a compressed trace's is shorter)

    @property
    def covered(self) -> bool:
        return self.p10 <= self.actual <= self.p90

    @property
    def error(self) -> float:
        """|p50 − actual| over the actual wait (None-like inf when either is unbounded)."""
        if math.isinf(self.actual) or math.isinf(self.p50):
            return 0.0 if self.actual == self.p50 else math.inf
        return abs(self.p50 - self.actual) / max(self.actual, self.min_wait_s)

    @property
    def band(self) -> str:
        return next((label for bound, label in BANDS if self.actual < bound), AFTER)


def moments(seed: int, count: int, start: int, end: int) -> list[int]:
    """``count`` moments drawn uniformly in ``[start, end)``, sorted: reproducible from the seed."""
    rng = random.Random(seed)
    return sorted(rng.randrange(start, end) for _ in range(count))


def checks_at(
    fleet: Fleet,
    jobs: Sequence[Job],
    truth: Outcome,
    records: Sequence[Record],
    at: int,
    *,
    settings: Settings,
    config: SimulationConfig,
) -> list[Check]:
    """Every waiting workload's forecast at ``at``, beside its admission in the run ``truth``."""
    moment = moment_at(fleet, jobs, records, at, config=config)
    report = forecast(moment, settings)
    paused = moment.simulation.by_key
    actual = {r.key: r for r in truth.runs}
    out = []
    for f in report.forecasts:
        if f.declined:
            continue
        admitted = admission(actual[f.workload], len(paused[f.workload].attempts) - 1)
        q = {k: math.inf if v is None else float(v) for k, v in f.quantiles.items()}
        delay = math.inf if admitted is None or admitted - at > settings.horizon_s else float(admitted - at)
        out.append(Check(f.workload, f.team, at, q["p10"], q["p50"], q["p90"], delay))
    return out


@dataclass(frozen=True)
class Row:
    label: str
    admissions: int
    coverage: float  # share covered
    median_error: float  # median relative error


def summarize(checks: Sequence[Check], key: Callable[[Check], str]) -> list[Row]:
    groups: dict[str, list[Check]] = defaultdict(list)
    for c in checks:
        groups[key(c)].append(c)
    return [row(label, groups[label]) for label in sorted(groups)]


def row(label: str, checks: Sequence[Check]) -> Row:
    if not checks:
        return Row(label, 0, math.nan, math.nan)
    return Row(
        label,
        len(checks),
        sum(c.covered for c in checks) / len(checks),
        statistics.median(c.error for c in checks),
    )


def by_band(checks: Sequence[Check]) -> list[Row]:
    order = [label for _, label in BANDS] + [AFTER]
    rows = {r.label: r for r in summarize(checks, lambda c: c.band)}
    return [rows[label] for label in order if label in rows]


def final_line(checks: Sequence[Check], where: str = "") -> str:
    """The figure's line; ``where`` names the source beside the simulated one (``testbed``)."""
    total = row("all", checks)
    label = f"forecast calibration ({where})" if where else "forecast calibration"
    return (
        f"{label}: 80 % interval covers {total.coverage * 100:.0f} % of {total.admissions} "
        f"admissions (median error {total.median_error * 100:.0f} % of the wait)"
    )
