"""The world differential's scenarios: a policy, a trace at its original scale, and a compression factor.

Each trace is drawn from a fixed seed, so every run of a scenario replays the same jobs. The original
trace runs in minutes-long jobs; compressed by ``factor`` it runs in tens of seconds, which the testbed
sustains on 2 cores (``trace.compression.Limits``). The bench (``python -m bench world_differential``)
and the e2e test (``test_world_differential.py``) share them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
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


def deep() -> Scenario:
    """A deep queue: 80 jobs of 1-4 cards from four teams over 40 minutes (240 s compressed), about three
    times what the 16 cards run meanwhile, so dozens wait at once and drain over about sixteen minutes."""
    teams = ("alpha", "beta", "gamma", "delta")
    jobs = _trace(36, teams, 80, 2400, ((1, 1), (1, 2), (1, 4), (2, 2)), (300, 900), 0.2)
    return Scenario("deep", HERE / "deep.yaml", jobs, 10.0, 2, 1200)


def _example_trace(seed: int) -> tuple[Job, ...]:
    """The example week's mix, scaled: training on H100 (1-2 pods of 2-4 cards; a fifth at train-high, the
    rest batch), dev jobs of one L40S time-slice replica at dev priority, and one 2 x 4 gang of vision's,
    which its quota can never admit (the example's NeverAdmissible)."""
    rng = random.Random(seed)
    teams = ("research", "research", "nlp", "vision")  # research, weight 2, submits the most
    jobs = []
    for i in range(30):
        team = teams[rng.randrange(len(teams))]
        submit, duration = rng.randrange(1800), rng.randint(200, 450)
        if rng.random() < 0.3:
            jobs.append(Job(f"w{i:03d}", team, team, submit, duration, JobKind.DEV, pods=1, gpu_milli=250,
                            priority_class="dev"))  # fmt: skip
            continue
        pods, gpus = ((1, 2), (1, 4), (2, 2), (1, 1))[rng.randrange(4)]
        high = rng.random() < 0.2
        jobs.append(Job(f"w{i:03d}", team, team, submit, duration, JobKind.TRAINING, pods=pods, gpus=gpus,
                        priority_class="train-high" if high else "batch"))  # fmt: skip
    jobs.append(Job("w030", "vision", "vision", 600, 300, JobKind.TRAINING, pods=2, gpus=4, priority_class="batch"))
    return tuple(sorted(jobs, key=lambda j: (j.submit_s, j.job_id)))


def example() -> Scenario:
    """The bundled example fleet scaled to fit (``world/example.yaml``): 31 jobs over 30 minutes (180 s
    compressed). Its never-admissible gang never ends, so a real run waits out ``drain_timeout_s``."""
    return Scenario("example", HERE / "example.yaml", _example_trace(35), 10.0, 3, 300)


def tuned() -> Scenario:
    """The example's trace under the policy ``gpufleet tune`` recommends for it (``world/tuned.yaml``)."""
    return replace(example(), name="tuned", policy=HERE / "tuned.yaml")


SCENARIOS = {"small": small, "fair": fair, "gang": gang, "example": example, "tuned": tuned, "deep": deep}
