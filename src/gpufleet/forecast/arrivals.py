"""Work not yet submitted, sampled from the arrivals seen before the forecast.

A new job of a higher priority, or of a team below its fair share, can be admitted before a
workload that waits now, so a forecast that ignores arrivals is too early. Teams submit in bursts
(a sweep of evaluation jobs seconds apart), so arrivals are drawn as *bursts* (jobs of one team less
than ``BURST_GAP_S`` apart), each sampled burst a copy of one seen, its jobs at their own offsets,
under fresh names. The gap is a script's, seconds: at a minute a busy team's separate jobs (one a
minute at its weekday peak) merged three or four to a burst, and a quiet evening's bursts, copied
from those, drew half as many jobs again as came. Per team, a Poisson process shaped over the day
by the hour-of-day profile of every burst seen (all teams, whole days only, smoothed over three
hours: a forecast made in the evening expects the quiet night before the morning's rush):

- *What* a burst is: a copy of any of the team's bursts of the last ``WINDOW_S``, uniformly. The
  rare heavy ones (a 16-card training gang) are the ones a forecast most needs, and a day's
  bursts seldom hold one: a pool of the last day alone never drew them.
- *How often*: the team's recent rate, its bursts counted with a weight that halves every
  ``HALF_LIFE_S`` back from the moment, over the exposure weighted alike and by the hour-of-day
  profile (a morning after a quiet night is not a low rate). Recent hours count most, so the rate
  follows a change of level (a weekend, a deadline) within hours.
- *How sure*: each sample draws each team's rate from its Gamma posterior (shape the weighted count
  plus ``PRIOR_BURSTS``, Jeffreys'; rate the weighted exposure): a team seen submitting twice a day
  may well submit five times tomorrow, and every sample using the one mean rate put none of that in
  the interval. The fewer bursts the weights hold, the wider the draws.
- *How sure, further ahead*: the half-life says the evidence for a rate halves every 12 h, so it
  does into the future too: every ``STEP_S`` the sampled rate moves on by the Poisson–Gamma steady
  model's step (West and Harrison's discounting; discount δ = 2^(−step/half-life)): times a
  Beta(δa, (1 − δ)a) draw over δ, its shape a then δa. Its mean stays, its spread grows with the
  horizon: a day ahead the posterior holds a quarter of the bursts it holds now. Teams' rates do
  change (a weekend, a deadline, a sweep that never came), and a rate fixed for a sample's whole
  horizon made the waits of days, sums of thousands of arrivals, far surer than they are
  (docs/forecast-notebook.md, "How sure a coverage is, and arrivals decide the deep queues").
- *Which day*: where the history holds a whole week or more, each day of the week has its own
  factor (``weekly_factors``: its bursts over the whole weeks, against the mean day's), so a
  forecast made on a Friday evening expects the quiet weekend the last week showed, and the busy
  Monday after it. Day 0 is the first of the model's seconds (a trace's start; on a live cluster a
  Monday, ``submissions``). With less, every day is alike: a week's weekdays say nothing of its
  weekend. The factors need bursts counted as bursts (``BURST_GAP_S``): at a minute's gap a busy
  weekday's jobs merged and its factor read low (the bench fleet's halved weekend read as two
  thirds).

The arrivals are drawn in time order as they are read (``ArrivalModel.stream``): a forecast's
sample that stops an hour ahead draws an hour of them.
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate

from gpufleet.trace.job import Job

HOUR, DAY = 3600, 24 * 3600
WINDOW_S = 7 * DAY  # the bursts a sample copies, and the rate's history (weighted by HALF_LIFE_S)
HALF_LIFE_S = 12 * HOUR  # a burst's weight in its team's rate halves every 12 h back from the moment
PRIOR_BURSTS = 0.5  # the Gamma posterior's shape beyond the weighted count (Jeffreys' prior)
BURST_GAP_S = 10  # jobs of one team closer than this are one burst (a script's sweep, not a busy hour)
WEEK = 7 * DAY
MIN_WEEKS = 1  # whole weeks seen before each day of the week gets its own factor (``weekly_factors``)
STEP_S = 6 * HOUR  # the sampled rates move on every six hours (``ArrivalModel.stream``)
PREFIX = "fc"  # sampled jobs are named fc<sample>-<n>-<the job copied>


@dataclass(frozen=True)
class Burst:
    start_s: int  # its first job's submission
    offsets: tuple[int, ...]  # seconds from the burst's first job
    jobs: tuple[Job, ...]


@dataclass(frozen=True)
class ArrivalModel:
    """Per team, the bursts seen in the window; their rates are weighed from them (``weights``)."""

    at: int
    window_s: int
    bursts: dict[str, tuple[Burst, ...]]
    profile: tuple[float, ...] = (1.0,) * 24  # rate multiplier per hour of the day (mean 1)
    week: tuple[float, ...] = (1.0,) * 7  # rate multiplier per day of the week (mean 1; ``weekly_factors``)
    shift_s: int = 0  # added to each sampled submission: the model's seconds to the simulation's
    half_life_s: int = HALF_LIFE_S

    @classmethod
    def of(cls, seen: Sequence[Job], at: int, window_s: int = WINDOW_S) -> ArrivalModel:
        """From the jobs submitted by ``at``: those of the last ``window_s`` (or since the start)."""
        since = max(0, at - window_s)
        bursts = {
            team: tuple(Burst(g[0].submit_s, tuple(j.submit_s - g[0].submit_s for j in g), tuple(g)) for g in groups)
            for team, groups in sorted(_groups(j for j in seen if since < j.submit_s <= at).items())
        }
        return cls(at, max(at - since, 1), bursts, daily_profile(seen, at), weekly_factors(seen, at))

    def level(self, t: float) -> float:
        """The rate's multiplier at second ``t``: its hour of the day's, times its day of the week's."""
        return self.profile[int(t) % DAY // HOUR] * self.week[int(t) // DAY % 7]

    def _decay(self, t: float) -> float:
        """The weight of second ``t``: 1 at the moment, halving every ``half_life_s`` before it."""
        return math.exp(-math.log(2) * (self.at - t) / self.half_life_s)

    @property
    def exposure_s(self) -> float:
        """The window's seconds, each weighted by its decay and its hour's level (``level``): the
        denominator of every team's rate (a team's bursts over it are bursts per second at a level of 1)."""
        since, total, t = self.at - self.window_s, 0.0, float(self.at)
        lam = math.log(2) / self.half_life_s
        while t > since:  # hour by hour back: the profile is constant within an hour of the day
            low = max(since, (math.ceil(t) - 1) // HOUR * HOUR)
            total += self.level(low) * (self._decay(t) - self._decay(low)) / lam
            t = low
        return max(total, 1.0)

    @property
    def weights(self) -> dict[str, float]:
        """Per team, its bursts counted by their decay: the Gamma posterior's count."""
        return {team: sum(self._decay(b.start_s) for b in bursts) for team, bursts in self.bursts.items()}

    @property
    def teams(self) -> dict[str, float]:
        """Bursts per hour, per team: the posterior mean rate, over a day (the profile's mean is 1)."""
        exposure = self.exposure_s
        return {team: (w + PRIOR_BURSTS) * 3600 / exposure for team, w in self.weights.items()}

    def sample(self, rng: random.Random, horizon_s: int, tag: str) -> list[Job]:
        """Jobs submitted after ``at``, to ``at + horizon_s``, in arrival order (``stream``, drawn whole)."""
        return list(self.stream(rng, horizon_s, tag))

    def stream(self, rng: random.Random, horizon_s: int, tag: str) -> Iterator[Job]:
        """Jobs submitted after ``at``, to ``at + horizon_s``, in arrival order (submission, then
        name), drawn only as far as they are read: a forecast's sample that stops an hour ahead
        draws an hour of arrivals, not two days. First each team's rate, from its posterior; then
        the teams' processes as their sum, each candidate burst given to a team in proportion to its
        rate and copying one of that team's bursts, picked uniformly. Each generator's draws are in
        time order, so a stream read further repeats what a shorter read gave."""
        teams = sorted(team for team, bursts in self.bursts.items() if bursts)
        if not teams:
            return
        exposure, weights = self.exposure_s, self.weights
        shapes = [weights[team] + PRIOR_BURSTS for team in teams]
        rates = [rng.gammavariate(a, 1.0) / exposure for a in shapes]  # bursts per second at a profile of 1
        discount = 0.5 ** (STEP_S / self.half_life_s)  # 1.0 where the half-life is endless: the rates stay
        peak = max(self.profile) * max(self.week)
        end = self.at + horizon_s
        pending: list[tuple[int, str, Job]] = []  # drawn, not yet given: (submission, name, job)
        drawn = 0
        t = float(self.at)
        step_end = float(self.at + STEP_S)
        cumulative = list(accumulate(rates))
        while True:
            # thinning: candidates at the peak rate, kept by the hour's share
            gap = rng.expovariate(cumulative[-1] * peak) if cumulative[-1] > 0 else math.inf
            if t + gap > step_end and step_end < end:
                # the rates move on at each step (``STEP_S``), as the rate's own evidence fades
                t = step_end
                step_end += STEP_S
                if discount < 1.0:
                    for k, a in enumerate(shapes):
                        rates[k] *= rng.betavariate(discount * a, (1 - discount) * a) / discount
                        shapes[k] = discount * a
                cumulative = list(accumulate(rates))
                continue
            t += gap
            if t > end:
                break
            start = int(t) + 1
            while pending and pending[0][0] < start + self.shift_s:  # no later burst comes before these
                yield heapq.heappop(pending)[2]
            if rng.random() * peak > self.level(t):
                continue
            team = teams[min(bisect_right(cumulative, rng.random() * cumulative[-1]), len(teams) - 1)]
            pool = self.bursts[team]
            burst = pool[rng.randrange(len(pool))]
            for offset, job in zip(burst.offsets, burst.jobs, strict=True):
                name = f"{PREFIX}{tag}-{drawn}-{job.job_id}"
                drawn += 1
                submit = start + offset + self.shift_s
                heapq.heappush(pending, (submit, name, replace(job, job_id=name, submit_s=submit)))
        while pending:
            yield heapq.heappop(pending)[2]


def _groups(jobs: Iterable[Job]) -> dict[str, list[list[Job]]]:
    """Per team, its jobs in submission order cut into bursts: a gap of ``BURST_GAP_S`` or more
    starts the next one."""
    out: dict[str, list[list[Job]]] = defaultdict(list)
    for job in sorted(jobs, key=lambda j: (j.submit_s, j.job_id)):
        groups = out[job.team]
        if groups and job.submit_s - groups[-1][-1].submit_s < BURST_GAP_S:
            groups[-1].append(job)
        else:
            groups.append([job])
    return out


def _burst_starts(seen: Sequence[Job], before: int) -> list[int]:
    """When each team's bursts began, of the jobs submitted before ``before``."""
    return [g[0].submit_s for groups in _groups(j for j in seen if j.submit_s < before).values() for g in groups]


def weekly_factors(seen: Sequence[Job], at: int) -> tuple[float, ...]:
    """Bursts per day of the week over the whole weeks seen before ``at``, each day's count with one
    burst added (so a day seen empty is rare, not impossible), scaled to a mean of 1; flat with fewer
    than ``MIN_WEEKS`` of them. A week counts from the first it holds a submission from its first day
    on: the weeks before a young ledger's first record are not quiet weeks."""
    if not seen:
        return (1.0,) * 7
    first = min(j.submit_s for j in seen)
    begin = first // WEEK if first % WEEK < DAY else first // WEEK + 1
    end = at // WEEK
    if end - begin < MIN_WEEKS:
        return (1.0,) * 7
    counts = [1.0] * 7
    for start in _burst_starts(seen, end * WEEK):
        if start >= begin * WEEK:
            counts[start // DAY % 7] += 1
    mean = sum(counts) / 7
    return tuple(c / mean for c in counts)


def daily_profile(seen: Sequence[Job], at: int) -> tuple[float, ...]:
    """Bursts per hour of the day over the whole days before ``at``, smoothed over three hours and
    scaled to a mean of 1; flat with less than a day seen."""
    days = at // DAY
    if days < 1:
        return (1.0,) * 24
    counts = [0] * 24
    for start in _burst_starts(seen, days * DAY):
        counts[start % DAY // HOUR] += 1
    smooth = [(counts[h - 1] + counts[h] + counts[(h + 1) % 24]) / 3 + 0.1 for h in range(24)]
    mean = sum(smooth) / 24
    return tuple(v / mean for v in smooth)
