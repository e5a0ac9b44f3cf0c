"""Work not yet submitted, sampled from the arrivals seen before the forecast.

A new job of a higher priority, or of a team below its fair share, can be admitted before a
workload that waits now, so a forecast that ignores arrivals is too early. Teams submit in bursts
(a sweep of evaluation jobs seconds apart), so arrivals are drawn as *bursts*: per team, the bursts
of the last ``WINDOW_S`` (jobs less than ``BURST_GAP_S`` apart) give a rate, and each sampled burst
copies one of them, its jobs at their own offsets, under fresh names. A Poisson process at the
window's mean rate, shaped over the day by the hour-of-day profile of every burst seen so far (all
teams, whole days only, smoothed over three hours): a forecast made in the evening expects the
quiet night before the morning's rush. Weekly rhythm is not modelled (a week of history is rare).
The arrivals are drawn in time order as they are read (``ArrivalModel.stream``): a forecast's sample
that stops an hour ahead draws an hour of them.
"""

from __future__ import annotations

import heapq
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from gpufleet.trace.job import Job

HOUR, DAY = 3600, 24 * 3600
WINDOW_S = DAY  # the arrivals a rate is taken from
BURST_GAP_S = 60  # jobs of one team closer than this are one burst
PREFIX = "fc"  # sampled jobs are named fc<sample>-<n>-<the job copied>


@dataclass(frozen=True)
class Burst:
    offsets: tuple[int, ...]  # seconds from the burst's first job
    jobs: tuple[Job, ...]


@dataclass(frozen=True)
class ArrivalModel:
    """Per team, the bursts seen in the window and their rate (bursts per second)."""

    at: int
    window_s: int
    bursts: dict[str, tuple[Burst, ...]]
    profile: tuple[float, ...] = (1.0,) * 24  # rate multiplier per hour of the day (mean 1)
    shift_s: int = 0  # added to each sampled submission: the model's seconds to the simulation's

    @classmethod
    def of(cls, seen: Sequence[Job], at: int, window_s: int = WINDOW_S) -> ArrivalModel:
        """From the jobs submitted by ``at``: those of the last ``window_s`` (or since the start)."""
        since = max(0, at - window_s)
        per_team: dict[str, list[Job]] = defaultdict(list)
        for job in sorted(seen, key=lambda j: (j.submit_s, j.job_id)):
            if since < job.submit_s <= at:
                per_team[job.team].append(job)
        bursts: dict[str, tuple[Burst, ...]] = {}
        for team, jobs in sorted(per_team.items()):
            groups: list[list[Job]] = [[jobs[0]]]
            for job in jobs[1:]:
                if job.submit_s - groups[-1][-1].submit_s < BURST_GAP_S:
                    groups[-1].append(job)
                else:
                    groups.append([job])
            bursts[team] = tuple(Burst(tuple(j.submit_s - g[0].submit_s for j in g), tuple(g)) for g in groups)
        return cls(at, max(at - since, 1), bursts, daily_profile(seen, at))

    @property
    def teams(self) -> dict[str, float]:
        """Bursts per hour, per team."""
        return {team: len(b) * 3600 / self.window_s for team, b in self.bursts.items()}

    def sample(self, rng: random.Random, horizon_s: int, tag: str) -> list[Job]:
        """Jobs submitted after ``at``, to ``at + horizon_s``, in arrival order (``stream``, drawn whole)."""
        return list(self.stream(rng, horizon_s, tag))

    def stream(self, rng: random.Random, horizon_s: int, tag: str) -> Iterator[Job]:
        """Jobs submitted after ``at``, to ``at + horizon_s``, in arrival order (submission, then
        name), drawn only as far as they are read: a forecast's sample that stops an hour ahead
        draws an hour of arrivals, not two days. Every team's bursts as one Poisson process: the sum
        of the teams' processes, each candidate burst picked uniformly among every burst seen (so a
        team's share is its rate's); each generator's draws are in time order, so a stream read
        further repeats what a shorter read gave."""
        every = [b for bursts in self.bursts.values() for b in bursts]
        if not every:
            return
        peak = max(self.profile)
        rate = len(every) / self.window_s * peak
        end = self.at + horizon_s
        pending: list[tuple[int, str, Job]] = []  # drawn, not yet given: (submission, name, job)
        drawn = 0
        t = float(self.at)
        while True:
            t += rng.expovariate(rate)  # thinning: candidates at the peak rate, kept by the hour's share
            if t > end:
                break
            start = int(t) + 1
            while pending and pending[0][0] < start + self.shift_s:  # no later burst comes before these
                yield heapq.heappop(pending)[2]
            if rng.random() * peak > self.profile[int(t) % DAY // HOUR]:
                continue
            burst = every[rng.randrange(len(every))]
            for offset, job in zip(burst.offsets, burst.jobs, strict=True):
                name = f"{PREFIX}{tag}-{drawn}-{job.job_id}"
                drawn += 1
                submit = start + offset + self.shift_s
                heapq.heappush(pending, (submit, name, replace(job, job_id=name, submit_s=submit)))
        while pending:
            yield heapq.heappop(pending)[2]


def daily_profile(seen: Sequence[Job], at: int) -> tuple[float, ...]:
    """Bursts per hour of the day over the whole days before ``at``, smoothed over three hours and
    scaled to a mean of 1; flat with less than a day seen."""
    days = at // DAY
    if days < 1:
        return (1.0,) * 24
    counts = [0] * 24
    last: dict[str, int] = {}
    for job in sorted(seen, key=lambda j: (j.submit_s, j.job_id)):
        if job.submit_s >= days * DAY:
            continue
        previous = last.get(job.team)
        last[job.team] = job.submit_s
        if previous is None or job.submit_s - previous >= BURST_GAP_S:
            counts[job.submit_s % DAY // HOUR] += 1
    smooth = [(counts[h - 1] + counts[h] + counts[(h + 1) % 24]) / 3 + 0.1 for h in range(24)]
    mean = sum(smooth) / 24
    return tuple(v / mean for v in smooth)
