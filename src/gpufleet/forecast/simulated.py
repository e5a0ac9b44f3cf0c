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

from gpufleet.forecast.arrivals import ArrivalModel
from gpufleet.forecast.estimate import Moment
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
    history = RuntimeHistory.from_records(records, cutoff + timedelta(seconds=1))
    return Moment(world, at, history, ArrivalModel.of(seen, at), declared or {})
