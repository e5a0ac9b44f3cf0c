"""The forecast itself: from a paused simulation, many futures, and when each waiting workload was
admitted in them.

Each sample copies the paused run (the twin's queues, the cluster's bindings, every timer: a process
forked per sample, or an unpickled copy in this process), resamples
the runtime history (a bootstrap, ``RuntimeHistory.bootstrap``), draws a runtime for every workload not finished (a running one's conditioned on the time it has run,
``runtimes``), optionally streams in sampled arrivals (``arrivals``, read only as far as it runs), and lets the simulator's own loop run
it on until the last waiting workload is admitted (``_run_until_admitted``) or to the horizon. A waiting workload's admission is the first quota reservation it gets after the
moment; a sample in which it never gets one counts as "not within the horizon" (censored, reported as
such, never as a figure). p50 is the samples' nearest-rank median; p10 and p90 are the ends of the
80 % interval (``interval_ranks``: a prediction interval, which the real future falls within 80 % of
the time if the model is right, not the samples' own 10th and 90th percentiles). Which workloads it waits for: in each sample, the workloads whose end came at most
``FREED_BY_S`` before its admission (the finish that freed the quota, and Kueue's requeue second).

Samples are seeded (``Settings.seed`` and the sample's number), so one state and one seed always
give the same answer.
"""

from __future__ import annotations

import gc
import math
import multiprocessing
import pickle
import random
import traceback
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from gpufleet.compiled import native
from gpufleet.forecast.arrivals import ArrivalModel
from gpufleet.forecast.runtimes import Declared, RuntimeHistory, Shape
from gpufleet.simulate.engine import Simulation
from gpufleet.simulate.jobs import JobRun, State
from gpufleet.trace.job import Job
from gpufleet.twin import Twin

DAY = 86_400
FREED_BY_S = 2  # an end this close before an admission freed it (the finish, Kueue's requeue batch)
WAITING = (State.PENDING, State.BACKOFF, State.TERMINATING)  # waiting for quota at the moment
DONE = (State.FINISHED, State.DEACTIVATED)
WAITS_FOR_SHARE = 0.25  # named as waited for when its end freed the quota in this share of samples


@dataclass(frozen=True)
class Settings:
    samples: int = 40
    seed: int = 0
    arrivals: bool = True
    horizon_s: int = 2 * DAY  # how far ahead: an admission later than this is "not within the horizon"
    workers: int = 1  # processes the samples run in (``_samples``); the answer does not depend on it
    # only these workloads' forecasts (None: every waiting one). Each sample then stops once they are
    # admitted; what happened until then, and so their answer, is the same as in the full forecast
    only: frozenset[str] | None = None


@dataclass(frozen=True)
class Moment:
    """The state a forecast starts from: a simulation paused at ``at`` (seconds), the runtime
    history before it, the arrivals seen, and what owners declared (by workload key)."""

    simulation: Simulation
    at: int
    history: RuntimeHistory
    arrivals: ArrivalModel | None
    declared: dict[str, Declared]
    kinds: bool = True  # whether the jobs' kinds are known (a trace's); a live cluster's are not
    # seconds from a running workload's admission to its pods' start, where the cluster says they
    # started later than the replay started them (at the admission): its runtime counts from its pods
    late_starts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Forecast:
    """One waiting workload's expected admission, in seconds from the moment."""

    workload: str
    team: str
    waited_s: int  # since it last entered the queue
    # p10 and p90 (the 80 % interval's ends: ``interval_ranks``) and p50; None: beyond the horizon
    quantiles: dict[str, int | None]
    admitted: int  # samples in which it was admitted
    samples: int
    waits_for: tuple[tuple[str, float], ...]  # workload, share of samples its end freed the quota
    declined: str = ""  # why there is no figure (then the quantiles are empty)

    @property
    def interval(self) -> tuple[int | None, int | None]:
        return self.quantiles.get("p10"), self.quantiles.get("p90")


@dataclass(frozen=True)
class Basis:
    """What every forecast of one moment rests on."""

    at: int
    samples: int
    seed: int
    arrivals: bool
    arrival_rates: dict[str, float]  # bursts per hour per team, when arrivals were sampled
    history_runs: int
    sources: dict[str, int]  # runtime source -> draws, over every sample
    declined: str = ""


@dataclass(frozen=True)
class Report:
    basis: Basis
    forecasts: tuple[Forecast, ...]  # waiting workloads, by key


def shape_of(run: JobRun, *, kinds: bool = True) -> Shape:
    """The run's lookup shape; without ``kinds`` the kind is left empty, as the ledger's records leave it."""
    kind = run.job.kind.value if kinds else ""
    return Shape(run.job.team, run.job.model, run.ask.resource, run.ask.count * run.job.pods, kind)


def ran_at_least(run: JobRun, at: int) -> int:
    """How long the job is known to run, at ``at``: its current attempt's time so far, or a longer
    attempt cut short before (a preempted or evicted job starts again from the beginning, so its
    runtime is longer than any attempt it did not finish). Victims are the long jobs: a draw that
    forgot their earlier attempts would put them back in the queue as fresh, mostly short, runs."""
    return max(
        (
            (at if a.ended is None else min(a.ended, at)) - a.started
            for a in run.attempts
            if a.started is not None and a.started <= at
        ),
        default=0,
    )


def admission(run: JobRun, since: int) -> int | None:
    """When the run's quota was first reserved from its attempt ``since`` on (None: not yet)."""
    return next((a.reserved for a in run.attempts[since:] if a.reserved is not None), None)


def quantile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least ``q`` of the values at or below it."""
    return values[max(math.ceil(q * len(values)) - 1, 0)]


def interval_ranks(n: int) -> tuple[int, int]:
    """The ranks (1-based) of the 80 % interval's ends among ``n`` sorted samples.

    The real future is one more draw: if the model is right, it falls below the i-th of the n with
    probability i/(n+1) and above the j-th with (n+1-j)/(n+1). Ranks floor(0.1(n+1)) and
    ceil(0.9(n+1)) keep each side within 10 %, so the interval holds it at least 80 % of the time.
    The samples' nearest-rank p10 and p90 do not: the 4th and 36th of 40 hold it 32/41 = 78 % of the
    time, the 1st and 9th of 10 only 8/11 = 73 %. Under 9 samples no ranks reach 80 %: their whole
    range is given, which holds it (n-1)/(n+1) of the time."""
    return max((n + 1) // 10, 1), min((9 * (n + 1) + 9) // 10, n)


def forecast(moment: Moment, settings: Settings) -> Report:
    paused, at = moment.simulation, moment.at
    waiting = sorted(
        (r for r in paused.runs if r.state in WAITING and (settings.only is None or r.key in settings.only)),
        key=lambda r: r.key,
    )
    alive = [r for r in paused.runs if r.state not in DONE]
    rates = moment.arrivals.teams if settings.arrivals and moment.arrivals is not None else {}
    if moment.history.level(Shape("", "", "", 0), 0) is None:  # not even the fleet level answers
        why = f"too little history: {moment.history.runs} finished runs before the moment, at least 10 needed"
        basis = Basis(at, 0, settings.seed, settings.arrivals, rates, moment.history.runs, {}, why)
        return Report(basis, tuple(_declined(r, at, why) for r in waiting))
    forked = _forks(settings.samples, settings.workers)
    # each sample's copy of the paused run: a forked process's own (copy-on-write: only the pages the
    # sample touches are copied), else one snapshot unpickled per sample
    frozen = b"" if forked else pickle.dumps(paused, protocol=pickle.HIGHEST_PROTOCOL)
    delays: dict[str, list[float]] = {r.key: [] for r in waiting}
    freed: dict[str, Counter[str]] = {r.key: Counter() for r in waiting}
    sources: Counter[str] = Counter()

    def one(k: int) -> _Sampled:
        sim = paused if forked else pickle.loads(frozen)
        return _sample(moment, settings, sim=sim, waiting=waiting, alive=alive, rates=rates, k=k)

    for sampled in (_forked if forked else _serial)(settings.samples, settings.workers, one):  # in the samples' order
        for key, delay, names in sampled.waiting:
            delays[key].append(delay)
            freed[key].update(names)
        sources.update(sampled.sources)
    basis = Basis(at, settings.samples, settings.seed, bool(rates), rates, moment.history.runs, dict(sources))
    return Report(basis, tuple(_forecast(r, at, delays[r.key], freed[r.key], settings.samples) for r in waiting))


@dataclass(frozen=True)
class _Sampled:
    """One sample's outcome: per waiting workload its delay (inf: not within the horizon) and the
    workloads whose end freed its quota; the runtime sources drawn."""

    waiting: tuple[tuple[str, float, frozenset[str]], ...]
    sources: Counter[str]


def _sample(
    moment: Moment,
    settings: Settings,
    *,
    sim: Simulation,
    waiting: list[JobRun],
    alive: list[JobRun],
    rates: dict[str, float],
    k: int,
) -> _Sampled:
    """Sample ``k`` on ``sim``, its own copy of the paused run (``waiting`` and ``alive`` may be its
    runs: they are read before it runs on); its own generator (seed and number), so it does not
    depend on the others or on the process it runs in."""
    at = moment.at
    rng = random.Random(settings.seed * 1_000_003 + k)
    # its attempt waiting at the moment; its first, for one entering after it (the live path's Workload
    # waiting out Kueue's requeue backoff)
    since = [(r.key, max(len(r.attempts) - 1, 0)) for r in waiting]
    sim.unrecorded()  # only admissions and ends are read: no metrics, no scheduler's reasons
    durations = {}
    sources: Counter[str] = Counter()
    history = moment.history.bootstrap(rng)
    for r in alive:
        late = moment.late_starts.get(r.key, 0)
        declared = moment.declared.get(r.key)
        if late and declared is not None and declared.deadline_s is not None:
            declared = replace(declared, deadline_s=declared.deadline_s - late)  # a deadline runs from the admission
        draw = history.draw(shape_of(r, kinds=moment.kinds), max(ran_at_least(r, at) - late, 0), rng, declared)
        assert draw is not None  # the fleet level answers (checked by the caller)
        durations[r.key] = late + draw.runtime_s
        sources[draw.source] += 1
    sim.retime(at, durations)
    if rates and moment.arrivals is not None:  # read only as far as the sample runs
        sim.stream(_arrivals(moment, history, settings, random.Random(f"arrivals {settings.seed} {k}"), k))
    # one that can never be admitted declines (``_forecast``) whatever the sample: not waited for
    _run_until_admitted(sim, at + settings.horizon_s, {r.key for r in waiting if not r.never})
    ends = sorted(
        (a.ended, r.key)
        for r in sim.runs
        for a in r.attempts
        if a.end_reason == "Finished" and a.ended is not None and a.ended > at
    )
    times = [t for t, _ in ends]
    out: list[tuple[str, float, frozenset[str]]] = []
    for key, attempt in since:
        admitted = admission(sim.by_key[key], attempt)
        if admitted is None:
            out.append((key, math.inf, frozenset()))
            continue
        lo, hi = bisect_left(times, admitted - FREED_BY_S), bisect_right(times, admitted)
        out.append((key, float(admitted - at), frozenset(k for _, k in ends[lo:hi] if k != key)))
    return _Sampled(tuple(out), sources)


def _forks(count: int, workers: int) -> bool:
    """Whether the samples run in forked processes, where fork exists: with more than one worker,
    or one at a time where the twin is compiled (``gpufleet.compiled``: a paused run holding it
    cannot be pickled)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    return min(workers, count) > 1 or native(Twin)


def _serial(count: int, workers: int, one: Callable[[int], _Sampled]) -> list[_Sampled]:
    """Every sample, in order, in this process."""
    return [one(k) for k in range(count)]


@dataclass(frozen=True)
class _Failed:
    """A sample's process failed: its traceback, raised again in the parent."""

    traceback: str


def _child(one: Callable[[int], _Sampled], k: int, send: Connection) -> None:
    """A forked sample: it runs on the parent's paused run, its own copy-on-write copy."""
    gc.freeze()  # the inherited objects are not the child's to collect: scanning them copies their pages
    try:
        result: _Sampled | _Failed = one(k)
    except Exception:  # any failure goes back to the parent, which raises it
        result = _Failed(traceback.format_exc())
    send.send(result)
    send.close()


def _forked(count: int, workers: int, one: Callable[[int], _Sampled]) -> list[_Sampled]:
    """Every sample, in order, each in a process forked for it, ``workers`` at a time. A fork shares
    the paused run with the parent page by page, copying only what the sample changes, where an
    unpickled copy rebuilt all of it per sample (0.05-0.2 s each). Each sample's generator is its own
    (seed and number), so the answer does not depend on how many workers ran it."""
    context = multiprocessing.get_context("fork")
    done: dict[int, _Sampled] = {}
    running: dict[Connection, tuple[int, BaseProcess]] = {}
    queued = iter(range(count))
    try:
        while len(done) < count:
            for k in queued:
                receive, send = context.Pipe(duplex=False)
                started: BaseProcess = context.Process(target=_child, args=(one, k, send), daemon=True)
                started.start()
                send.close()
                running[receive] = (k, started)
                if len(running) >= min(workers, count):
                    break
            for ready in wait(list(running)):
                assert isinstance(ready, Connection)
                k, finished = running.pop(ready)
                try:
                    result = ready.recv()
                except EOFError:
                    result = _Failed(f"its process ended without an answer (exit code {finished.exitcode})")
                ready.close()
                finished.join()
                if isinstance(result, _Failed):
                    raise RuntimeError(f"forecast sample {k} failed:\n{result.traceback}")
                done[k] = result
    finally:
        for receive, (_, left) in running.items():
            left.kill()
            left.join()
            receive.close()
    return [done[k] for k in range(count)]


def _run_until_admitted(sim: Simulation, end: int, keys: set[str]) -> None:
    """Run the sample on until every watched workload was admitted, or to the horizon ``end``.
    What comes after is not asked: each watched workload's admission, and the ends before it, are
    the same as if the sample ran on (``tests/forecast/test_branch.py``), so it stops right after the
    instant the last of them was admitted (``Simulation.reservations`` says which were, as they are)."""
    left = set(keys)
    if not left:
        return
    log: list[JobRun] = []
    sim.reservations = log

    def admitted_all() -> bool:
        if log:
            left.difference_update(r.key for r in log)
            log.clear()
        return not left

    sim.advance(end, admitted_all)
    sim.reservations = None


def _arrivals(moment: Moment, history: RuntimeHistory, settings: Settings, rng: random.Random, k: int) -> Iterator[Job]:
    """Sample ``k``'s arrivals in arrival order, each with a runtime drawn like any fresh workload's
    (its owner's declared one where the moment has it: only the calibration's known arrivals do),
    drawn as they are read. Their generator is their own (seed and number), not the sample's: how far
    a sample runs decides how many are read, and the runtimes and the stop must not depend on that."""
    assert moment.arrivals is not None
    catalog = moment.simulation.catalog
    for job in moment.arrivals.stream(rng, settings.horizon_s, str(k)):
        ask = catalog.ask_of(job)
        if ask is None:
            continue
        kind = job.kind.value if moment.kinds else ""  # looked up as the history was recorded
        shape = Shape(job.team, job.model, ask.resource, ask.count * job.pods, kind)
        draw = history.draw(shape, 0, rng, moment.declared.get(f"{job.namespace}/{job.job_id}"))
        if draw is not None:
            yield job.lasting(draw.runtime_s)


def _declined(run: JobRun, at: int, why: str) -> Forecast:
    return Forecast(run.key, run.team, _waited(run, at), {}, 0, 0, (), why)


def _forecast(run: JobRun, at: int, delays: list[float], freed: Counter[str], samples: int) -> Forecast:
    if run.never:
        return _declined(run, at, "never admitted: it asks more than its team's quota can ever reach")
    delays.sort()
    low, high = interval_ranks(len(delays))
    quantiles = {
        name: None if math.isinf(value) else int(value)
        for name, value in (("p10", delays[low - 1]), ("p50", quantile(delays, 0.5)), ("p90", delays[high - 1]))
    }
    admitted = sum(1 for d in delays if not math.isinf(d))
    waits = tuple(
        (key, round(n / samples, 2))
        for key, n in sorted(freed.items(), key=lambda kv: (-kv[1], kv[0]))
        if n / samples >= WAITS_FOR_SHARE
    )[:3]
    return Forecast(run.key, run.team, _waited(run, at), quantiles, admitted, samples, waits)


def _waited(run: JobRun, at: int) -> int:
    """Since it last entered the queue; 0 for one entering after the moment."""
    return at - run.attempt.queued if run.attempts else 0
