"""The world differential's scenarios: a policy, a trace at its original scale, and a compression factor.

Each trace is drawn from a fixed seed, so every run of a scenario replays the same jobs. The original
trace runs in minutes-long jobs; compressed by ``factor`` it runs in tens of seconds, which the testbed
sustains on 2 cores (``trace.compression.Limits``). The bench (``python -m bench world_differential``)
and the e2e test (``test_world_differential.py``) share them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from gpufleet.policy import Fleet, load_policy, resolve
from gpufleet.trace.job import Job, JobKind

HERE = Path(__file__).resolve().parent / "world"


@dataclass(frozen=True)
class Scenario:
    name: str
    policy: Path
    jobs: tuple[Job, ...]  # the original trace
    factor: float  # compression for the testbed
    real_runs: int  # testbed runs for the noise floor
    drain_timeout_s: float  # how long the testbed may take after the last arrival

    def fleet(self) -> Fleet:
        return resolve(load_policy(self.policy))


def _trace(
    seed: int,
    teams: tuple[str, ...],
    count: int,
    span_s: int,
    shapes: tuple[tuple[int, int], ...],
    durations: tuple[int, int],
    high: float,
) -> tuple[Job, ...]:
    """``count`` jobs arriving uniformly over ``span_s``: (pods, GPUs per pod) from ``shapes``,
    durations uniform in ``durations``, a share ``high`` at high priority."""
    rng = random.Random(seed)
    jobs = []
    for i in range(count):
        team = teams[rng.randrange(len(teams))]
        pods, gpus = shapes[rng.randrange(len(shapes))]
        jobs.append(
            Job(
                job_id=f"w{i:03d}",
                team=team,
                namespace=team,
                submit_s=rng.randrange(span_s),
                duration_s=rng.randint(*durations),
                kind=JobKind.TRAINING if pods > 1 or gpus >= 4 else JobKind.BATCH_EVAL,
                pods=pods,
                gpus=gpus,
                priority_class="high" if rng.random() < high else "low",
            )
        )
    return tuple(sorted(jobs, key=lambda j: (j.submit_s, j.job_id)))


def small() -> Scenario:
    """CI-sized: 18 jobs of 1-4 cards over 25 minutes (150 s compressed), on 8 cards."""
    jobs = _trace(32, ("alpha", "beta"), 18, 1500, ((1, 1), (1, 2), (1, 4), (2, 2)), (200, 450), 0.25)
    return Scenario("small", HERE / "small.yaml", jobs, 10.0, 3, 600)


def fair() -> Scenario:
    """Fair sharing among three weighted teams: 24 jobs over 30 minutes (180 s compressed)."""
    jobs = _trace(33, ("alpha", "beta", "gamma"), 24, 1800, ((1, 1), (1, 2), (1, 4), (2, 2)), (200, 450), 0.2)
    return Scenario("fair", HERE / "fair.yaml", jobs, 10.0, 3, 600)


def gang() -> Scenario:
    """Gangs of 2-3 pods on three 4-card nodes: 16 jobs over 30 minutes (180 s compressed)."""
    jobs = _trace(34, ("alpha", "beta"), 16, 1800, ((2, 2), (2, 4), (3, 4), (1, 2)), (200, 450), 0.25)
    return Scenario("gang", HERE / "gang.yaml", jobs, 10.0, 3, 600)


SCENARIOS = {"small": small, "fair": fair, "gang": gang}
