"""What one simulated run leaves behind: the runs, the nodes, the meter and the policy's facts the
metrics, the ledger and the report read. Apart from the loop (``engine``) so that a reader of a run
need not load how it was run."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.idle import IdleWatch
from gpufleet.simulate.jobs import JobRun
from gpufleet.simulate.meter import Meter
from gpufleet.simulate.nodes import PoolNodes
from gpufleet.trace.job import Job


@dataclass
class Outcome:
    """What one run leaves behind for the metrics, the ledger and the report."""

    config: SimulationConfig
    runs: list[JobRun]
    skipped: list[Job]
    pools: dict[str, PoolNodes]
    meter: Meter
    end: int
    teams: list[str]
    weights: dict[str, float]
    priorities: dict[str, int]  # priority class -> value (the queue world's Workload priority)
    local_queues: dict[str, str]  # namespace -> its LocalQueue (queue world only)
    kueue_cycles: int = 0  # scheduling cycles the twin ran (queue world only): what the run cost
    watch: IdleWatch | None = None  # what the idle series were computed with (the pathologies ask it again)
