"""Held-out weeks: a recommendation is judged on weeks it was not tuned on.

A policy tuned on last week is applied to next week. Issue 33 showed one that beat first apply on its
own week and, on the next, stranded 22 jobs with Jain 0.83. So ``tune --holdout N`` judges the
candidates on N other weeks and recommends only one that meets every constraint on each of them.

The held-out weeks come from the trace itself, by a **per-team day-block bootstrap**: for each team
and each day of the trace's span, the team's jobs of a day drawn at random (with replacement) from
the trace, moved to that day. Why this and not other synthetic seeds: a platform lead has a trace of
their own cluster, not the generator's spec, and the bootstrap needs nothing else; blocks of a whole
day keep each team's daily rhythm and bursts (a gang of jobs submitted together stays together),
while drawing days per team independently changes which teams collide, which is what a next week
changes. What it cannot do is invent a job size the trace never held. Weeks given as traces
(``--holdout-trace``, e.g. synthesized with other seeds, as ``bench/tune_bench.py`` does) are judged the
same way.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gpufleet.simulate.config import DAY
from gpufleet.trace.job import Job


@dataclass(frozen=True)
class Week:
    name: str
    jobs: tuple[Job, ...]


def bootstrap(jobs: Sequence[Job], count: int, seed: int) -> list[Week]:
    """``count`` weeks, each a per-team day-block resample of ``jobs`` (reproducible from ``seed``)."""
    if not jobs:
        return []
    days = max(j.submit_s for j in jobs) // DAY + 1
    by_team_day: dict[str, dict[int, list[Job]]] = defaultdict(lambda: defaultdict(list))
    for j in jobs:
        by_team_day[j.team][j.submit_s // DAY].append(j)
    weeks = []
    for n in range(count):
        rng = random.Random(f"{seed}/{n}")
        drawn: list[Job] = []
        for team in sorted(by_team_day):
            for day in range(days):
                source = rng.randrange(days)
                for j in by_team_day[team].get(source, []):
                    submit = day * DAY + j.submit_s % DAY
                    drawn.append(replace(j, job_id=f"{j.job_id}-b{n}d{day}", submit_s=submit))
        drawn.sort(key=lambda j: (j.submit_s, j.team, j.job_id))  # arrival order; the id breaks ties
        weeks.append(Week(f"bootstrap-{n + 1}", tuple(drawn)))
    return weeks
