"""The state at a moment of a simulated run, as a forecaster there would see it.

What it sees: the jobs submitted by then, and the ledger's records as of then. A job that finished
by then has its runtime known; every other job's is not, so it is replaced by a placeholder the
simulation never reaches before the moment, and the forecast draws it afresh (``estimate``). Replaying
those jobs through the queue world to the moment rebuilds exactly the run's state there (Kueue
knows no runtimes; a job's only finishes at the moment or after), with no knowledge of the future
in it: no later arrival, no true runtime of an unfinished job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from gpufleet.forecast.answer import check_moment, check_workload
from gpufleet.forecast.arrivals import ArrivalModel
from gpufleet.forecast.estimate import DONE, Moment, Report, Settings, forecast, ran_at_least, shape_of
from gpufleet.forecast.runtimes import Declared, RuntimeHistory
from gpufleet.ledger.records import Allocation, EndReason, Record
from gpufleet.policy import Fleet
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.queue_world import QueueWorld
from gpufleet.simulate.records import ledger_records
from gpufleet.trace.job import Job

UNKNOWN_S = 10**9  # a runtime not known yet: longer than any trace, replaced by a draw before use
RUN = "queue"  # the ledger's run name for the queue world


def records_at(fleet: Fleet, jobs: Sequence[Job], at: int, config: SimulationConfig) -> list[Record]:
    """The ledger as of ``at`` of simulating ``jobs`` under the fleet's policy."""
    world = QueueWorld(fleet, [j for j in jobs if j.submit_s <= at], config)
    world.advance(at)
    return ledger_records(world.outcome(), RUN)


def moment_at(
    fleet: Fleet,
    jobs: Sequence[Job],
    records: Sequence[Record],
    at: int,
    *,
    config: SimulationConfig,
    declared: dict[str, Declared] | None = None,
) -> Moment:
    """The state at ``at``: ``records`` may run past it (a finished run's); only what was written by
    ``at`` is read."""
    cutoff = config.start + timedelta(seconds=at)
    finished = {
        (r.namespace, r.name)
        for r in records
        if isinstance(r, Allocation)
        and r.end_reason is EndReason.FINISHED
        and r.finished is not None
        and r.finished <= cutoff
    }
    seen = [
        j if (j.namespace, j.job_id) in finished else replace(j, duration_s=UNKNOWN_S) for j in jobs if j.submit_s <= at
    ]
    world = QueueWorld(fleet, seen, config)
    world.advance(at)
    # Censored: every job not finished that has run, at the longest it is known to run (the running
    # ones, and the victims waiting to run again, which are the long ones), once per job.
    running = [
        (shape_of(r), ran_at_least(r, at)) for r in world.runs if r.state not in DONE and ran_at_least(r, at) > 0
    ]
    kinds = {(j.namespace, j.job_id): j.kind.value for j in seen}  # the trace says what the ledger does not
    history = RuntimeHistory.from_records(records, cutoff + timedelta(seconds=1), running, kinds)
    return Moment(world, at, history, ArrivalModel.of(seen, at), declared or {})


def forecast_trace(
    fleet: Fleet,
    jobs: Sequence[Job],
    at: int,
    *,
    settings: Settings,
    config: SimulationConfig,
    workload: str | None = None,
) -> Report:
    """``gpufleet forecast --trace``: every workload waiting at ``at`` of simulating ``jobs`` (or the
    one named), forecast from the run's state and ledger as of then."""
    if not jobs:
        check_moment(at, 0, 0)
    check_moment(at, min(j.submit_s for j in jobs), max(j.submit_s for j in jobs))
    moment = moment_at(fleet, jobs, records_at(fleet, jobs, at, config), at, config=config)
    if workload is not None:
        check_workload(workload, moment.simulation.by_key, at)
    report = forecast(moment, settings)
    if workload is None:
        return report
    return Report(report.basis, tuple(f for f in report.forecasts if f.workload == workload))
