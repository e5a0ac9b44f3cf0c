"""How good the forecasts are: at moments of a simulated run, forecast every waiting workload from
what was known then, and compare with when the same run admitted it.

The rule, so that the figure tests an 80 % interval and nothing wider:

- The forecast and the check share one horizon (``Settings.horizon_s``): an admission later than it,
  or never, is "beyond the horizon" (``actual`` inf), as a p10/p50/p90 no sample reached is (inf).
- A check is *covered* when p10 ≤ actual ≤ p90 is known to hold: a p90 beyond the horizon bounds
  above any admission within it (the true p90 is later still).
- A check is *censored* when both the admission and p90 lie beyond the horizon: whether the actual
  fell below the true p90 is then unknown. It is neither covered nor missed, left out of the
  coverage and the error, and counted apart (``Row.censored``). Counting it covered, as an interval
  [p10, ∞) would, tests a 90 % interval, not an 80 % one. The calibration therefore forecasts with a
  horizon long enough that censoring is rare (``checks_at``'s callers), and says how many were.
- An admission beyond the horizon with p90 within it is a miss (the forecast too early).

The error is |p50 − actual| relative to the actual remaining wait (at least ``MIN_WAIT_S``, so a
workload admitted the next second does not turn a few seconds into 1000 %; a compressed trace, as
the testbed runs, scales that floor with its time: ``Check.min_wait_s``). Wait bands are of the
actual remaining wait.

The checks of one moment are not independent: they share its state and its sampled futures, and a
deep queue's workloads are admitted together, early or late together. So a coverage of thousands of
checks from a few moments says less than its count suggests (on the 1,000-GPU fleet one team's 71
checks at one moment were 6 % covered, its 2,903 at another 91 %). ``Row.low``/``Row.high`` give the
coverage's interval over moments (a cluster bootstrap: moments drawn with replacement, each with all
its checks), which is as wide as the moments disagree.

A simulated run's submissions stop at its trace's last one; the forecaster is told so (its sampled
arrivals stop there too: ``TraceEnd``). Otherwise every admission in the run's drain, after the last
submission, would be judged against futures that went on submitting: the bench's week admits a
third of the workloads waiting at its later moments after its last submission.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from gpufleet.forecast.arrivals import ArrivalModel
from gpufleet.forecast.estimate import Settings, admission, forecast
from gpufleet.forecast.runtimes import Declared
from gpufleet.forecast.simulated import moment_at
from gpufleet.ledger.records import Record
from gpufleet.policy import Fleet
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.outcome import Outcome
from gpufleet.trace.job import Job

MIN_WAIT_S = 60
SPREAD = 0.9  # the coverage's interval over moments (``Row.low``, ``Row.high``)
RESAMPLES = 2000  # of the cluster bootstrap; seeded, so every report prints the same interval
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
    run: int = 0  # which run the moment is of, where checks of several runs are pooled (the testbed's)

    @property
    def censored(self) -> bool:
        """Both the admission and p90 beyond the horizon: whether it was covered is unknown."""
        return math.isinf(self.actual) and math.isinf(self.p90)

    @property
    def covered(self) -> bool:
        return not self.censored and self.p10 <= self.actual <= self.p90

    @property
    def early(self) -> bool:
        """Admitted after p90: the forecast too early (a miss)."""
        return not self.censored and self.actual > self.p90

    @property
    def late(self) -> bool:
        """Admitted before p10: the forecast too late (a miss)."""
        return self.actual < self.p10

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


@dataclass(frozen=True)
class TraceEnd(ArrivalModel):
    """The arrival model, its samples cut at the trace's last submission (``until``, seconds): the
    simulated run being judged submits nothing after it."""

    until: int = 0

    def stream(self, rng: random.Random, horizon_s: int, tag: str) -> Iterator[Job]:  # ``sample`` reads it too
        return super().stream(rng, max(min(horizon_s, self.until - self.at), 0), tag)


@dataclass(frozen=True)
class KnownArrivals(ArrivalModel):
    """The run's own submissions after the moment, in every sample: the arrivals no forecast can know,
    given to it as a diagnostic (``checks_at``'s ``known_arrivals``)."""

    future: tuple[Job, ...] = ()

    def stream(self, rng: random.Random, horizon_s: int, tag: str) -> Iterator[Job]:
        end = self.at + horizon_s
        for job in sorted(self.future, key=lambda j: (j.submit_s, j.job_id)):
            if self.at < job.submit_s <= end:
                yield replace(job, submit_s=job.submit_s + self.shift_s)


def checks_at(
    fleet: Fleet,
    jobs: Sequence[Job],
    truth: Outcome,
    records: Sequence[Record],
    at: int,
    *,
    settings: Settings,
    config: SimulationConfig,
    known_runtimes: bool = False,
    known_arrivals: bool = False,
) -> list[Check]:
    """Every waiting workload's forecast at ``at``, beside its admission in the run ``truth``; the
    sampled arrivals stop at the trace's last submission, as the run's do. Two diagnostics take a
    guess away, so that what is left of the error is the other's (or, with both, the forecast's own
    state: each interval is then the run's admission): ``known_runtimes`` gives the forecast every
    job's true runtime, as if each owner had declared it; ``known_arrivals`` gives every sample the
    jobs the run went on to submit, in place of sampled ones (drawn runtimes unless both are known)."""
    moment = moment_at(fleet, jobs, records, at, config=config)
    if moment.arrivals is not None:
        model = vars(moment.arrivals)
        arrivals = (
            KnownArrivals(**model, future=tuple(j for j in jobs if j.submit_s > at))
            if known_arrivals
            else TraceEnd(**model, until=max(j.submit_s for j in jobs))
        )
        moment = replace(moment, arrivals=arrivals)
    if known_runtimes:
        moment = replace(moment, declared={r.key: Declared(expected_s=r.job.duration_s) for r in truth.runs})
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
    admissions: int  # judged: covered or missed (the censored left out)
    coverage: float  # share of the judged covered
    median_error: float  # median relative error of the judged
    censored: int = 0  # both the admission and p90 beyond the horizon: not judged
    moments: int = 0  # the moments the judged checks were made at
    low: float = math.nan  # the coverage's 90 % interval over moments (nan: fewer than two moments)
    high: float = math.nan


def summarize(checks: Sequence[Check], key: Callable[[Check], str]) -> list[Row]:
    groups: dict[str, list[Check]] = defaultdict(list)
    for c in checks:
        groups[key(c)].append(c)
    return [row(label, groups[label]) for label in sorted(groups)]


def row(label: str, checks: Sequence[Check]) -> Row:
    judged = [c for c in checks if not c.censored]
    censored = len(checks) - len(judged)
    if not judged:
        return Row(label, 0, math.nan, math.nan, censored)
    per_moment: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])  # (run, moment): [covered, judged]
    for c in judged:
        per_moment[(c.run, c.at)][0] += c.covered
        per_moment[(c.run, c.at)][1] += 1
    low, high = over_moments([tuple(v) for _, v in sorted(per_moment.items())])
    return Row(
        label,
        len(judged),
        sum(c.covered for c in judged) / len(judged),
        statistics.median(c.error for c in judged),
        censored,
        len(per_moment),
        low,
        high,
    )


def over_moments(
    counts: Sequence[tuple[int, ...]], spread: float = SPREAD, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """The ``spread`` percentile interval of the pooled coverage when the moments (``counts``: covered
    and judged checks at each, in a fixed order) are drawn again with replacement, each with all its
    checks; nan with fewer than two moments, where nothing says how much moments differ."""
    if len(counts) < 2:
        return math.nan, math.nan
    rng = random.Random(seed)
    shares = []
    for _ in range(resamples):
        drawn = [counts[rng.randrange(len(counts))] for _ in counts]
        shares.append(sum(c[0] for c in drawn) / sum(c[1] for c in drawn))
    shares.sort()
    tail = (1 - spread) / 2
    return shares[int(tail * (resamples - 1))], shares[math.ceil((1 - tail) * (resamples - 1))]


def by_band(checks: Sequence[Check]) -> list[Row]:
    order = [label for _, label in BANDS] + [AFTER]
    rows = {r.label: r for r in summarize(checks, lambda c: c.band)}
    return [rows[label] for label in order if label in rows]


def spread_line(checks: Sequence[Check]) -> str:
    """How far the coverage could move with other moments: the line beside ``final_line``."""
    total = row("all", checks)
    if math.isnan(total.low):
        return f"over moments: no interval from {total.moments} moment{'s' if total.moments != 1 else ''} judged"
    return (
        f"over moments: {total.low * 100:.0f}–{total.high * 100:.0f} % ({SPREAD * 100:.0f} % interval of a "
        f"bootstrap over {total.moments} moments; the checks of one moment move together)"
    )


def final_line(checks: Sequence[Check], where: str = "") -> str:
    """The figure's line; ``where`` names the source beside the simulated one (``testbed``). The
    censored checks are not in it: ``censored_line`` says how many there were."""
    total = row("all", checks)
    label = f"forecast calibration ({where})" if where else "forecast calibration"
    if not total.admissions:
        return f"{label}: no admission to judge ({len(checks)} checks, {total.censored} of them censored)"
    return (
        f"{label}: 80 % interval covers {total.coverage * 100:.0f} % of {total.admissions} "
        f"admissions (median error {total.median_error * 100:.0f} % of the wait)"
    )


def misses(checks: Sequence[Check]) -> str:
    """The misses each way: which way the forecast leans."""
    early, late = sum(c.early for c in checks), sum(c.late for c in checks)
    return f"{early} admitted after p90 (forecast too early), {late} before p10 (too late)"


def censored_line(checks: Sequence[Check], horizon_s: int) -> str:
    """How many checks the figure leaves out, and why."""
    n = sum(c.censored for c in checks)
    return (
        f"not judged: {n} of {len(checks)} checks censored (admitted after the {horizon_s / 86_400:g}-day horizon, "
        f"or never, with p90 beyond it too)"
    )
