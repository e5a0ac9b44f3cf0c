"""Which half-life of the arrival rates the history itself prefers, as weights over a few.

The half-life says how fast a team's rate of bursts changes: how fast old bursts stop counting and
how fast the sampled rate wanders ahead (``arrivals``). One fixed 12 h was chosen on the bundled
example's week; the 1,000-GPU bench fleet's history disagrees both ways. Its first weekend's drop
scores 3 h best, by 68 log units against 12 h; its second week, whose rates hold, scores 48 h and
longer best, by 5-10 (docs/forecast-notebook.md, "Which half-life the history itself prefers").
A forecast that kept 12 h covered 49 % of that first week's admissions and 93 % of the second's.

So the history is asked. For each candidate half-life, the Poisson–Gamma discount filter the
samples use is run hour by hour over the window before the moment, per team: its shape (the
decayed count plus the prior) and rate (the decayed exposure) are discounted by 2^(−1 h/half-life)
each hour, then the hour's bursts and exposure are added. Before they are, the hour's burst count
is scored by the filter's one-step predictive, a negative binomial. The candidates' summed log
scores (after the window's first day, which only fills the filters) weigh them by Bayes' rule
over a uniform prior, and each sample draws its half-life from those weights: a mixture, not a
choice, so two half-lives that score alike both spread the samples. A window too short to score
(a young ledger) leaves the prior, every candidate alike, the widest of the mixtures: too little
history widens the interval, as issue 34 asks.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

HOUR, DAY = 3600, 24 * 3600
CANDIDATES_S = tuple(h * HOUR for h in (3, 6, 12, 24, 48, 96))  # the half-lives weighed
BURN_IN_S = DAY  # the window's first day fills the filters and is not scored


def log_score(counts: Sequence[int], exposures: Sequence[float], half_life_s: int, prior: float, scored: int) -> float:
    """The summed log one-step predictive of ``counts`` (bursts per hour) from the hour ``scored`` on,
    under the discount filter of ``half_life_s``: each hour's count is negative binomial with shape
    (decayed count + ``prior``) and odds exposure against the decayed exposure before it."""
    delta = 0.5 ** (HOUR / half_life_s)
    seen = exposure = total = 0.0
    for hour, (n, e) in enumerate(zip(counts, exposures, strict=True)):
        seen *= delta
        exposure *= delta
        if hour >= scored and exposure > 0 and e > 0:
            a = seen + prior
            total += (
                math.lgamma(n + a) - math.lgamma(a) - math.lgamma(n + 1)
                + a * math.log(exposure / (exposure + e)) + n * math.log(e / (exposure + e))
            )  # fmt: skip
        seen += n
        exposure += e
    return total


def weights(
    starts: Mapping[str, Sequence[int]], since: int, at: int, level: Callable[[float], float], prior: float
) -> tuple[tuple[int, float], ...]:
    """Per candidate half-life, its posterior weight (summing to 1) given each team's burst
    ``starts`` in ``(since, at]``, the whole hours of that window scored; ``level`` is the rate's
    multiplier at a second (the hour of the day's and the day of the week's)."""
    first, last = -(-since // HOUR), at // HOUR
    exposures = [level(h * HOUR) * HOUR for h in range(first, last)]
    scored = math.ceil(BURN_IN_S / HOUR)
    tables = []
    for team_starts in starts.values():
        per_hour = Counter(s // HOUR for s in team_starts)
        tables.append([per_hour.get(h, 0) for h in range(first, last)])
    scores = [sum(log_score(c, exposures, half, prior, scored) for c in tables) for half in CANDIDATES_S]
    top = max(scores)
    odds = [math.exp(s - top) for s in scores]
    total = sum(odds)
    return tuple((half, o / total) for half, o in zip(CANDIDATES_S, odds, strict=True))
