"""The one sentence that answers "what does the queue change?", and whether the tuned queue meets
the goal: more goodput than first apply, a shorter p95 wait for every team, and the constraints.

Every number in the sentence is read from the three worlds' measures (all simulated); when the
tuned queue does not beat first apply on something, the sentence says so instead of hiding it.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.durations import human
from gpufleet.simulate.measures import Measures, TeamMeasures
from gpufleet.tune.objectives import Constraints, feasible, violations


def _wait(seconds: int | None) -> str:
    return "–" if seconds is None else human(seconds)


def shortfalls(first: Measures, tuned: Measures, constraints: Constraints, stranded: int = 0) -> list[str]:
    """What keeps the tuned queue from the goal (empty: it meets it); ``stranded``: jobs first apply runs
    (or the input admits) that the tuned policy makes never-admissible, a constraint like the others, so
    a queue that strands work is never called better however its goodput and waits compare."""
    out = []
    if tuned.goodput_gpu_h <= first.goodput_gpu_h:
        out.append(f"goodput {tuned.goodput_gpu_h:,.0f} GPU-h is not above first apply's {first.goodput_gpu_h:,.0f}")
    before = {t.team: t.wait_p95_s for t in first.teams}
    for t in tuned.teams:
        was = before.get(t.team)
        if t.wait_p95_s is not None and was is not None and t.wait_p95_s > was:
            out.append(f"{t.team}'s p95 wait {_wait(t.wait_p95_s)} is longer than first apply's {_wait(was)}")
    if stranded > 0:
        out.append(f"{stranded:,} job(s) that first apply runs or the input admits can never be admitted (stranded)")
    if not feasible(violations(tuned, constraints, stranded=stranded)):
        out.append("a constraint is not met: " + "; ".join(constraints.describe()))
    return out


def headline(first: Measures, given: Measures, tuned: Measures, constraints: Constraints, stranded: int = 0) -> str:
    """One sentence, with the numbers, on what the tuned queue changes against first apply."""
    gain = (tuned.goodput_gpu_h / first.goodput_gpu_h - 1) * 100 if first.goodput_gpu_h else 0.0
    waits = _pairs(first.teams, tuned.teams)
    jain = "–" if tuned.jain is None else f"{tuned.jain:.3f}"
    text = (
        f"Simulated: with the tuned queue in front of the cards the week's goodput is "
        f"{tuned.goodput_gpu_h:,.0f} GPU-h against {first.goodput_gpu_h:,.0f} without a queue ({gain:+.0f} %), "
        f"p95 waits go {waits}, with {tuned.serving_starved_replica_min:,.0f} serving replica-minutes starved, "
        f"at most {tuned.preemptions_max} preemptions of one job and Jain {jain} "
        f"(the example policy as written: {given.goodput_gpu_h:,.0f} GPU-h, up to {given.preemptions_max} "
        f"preemptions of one job)."
    )
    missing = shortfalls(first, tuned, constraints, stranded)
    if missing:
        text += " It misses the goal: " + "; ".join(missing) + "."
    return text


def _pairs(first: Sequence[TeamMeasures], tuned: Sequence[TeamMeasures]) -> str:
    before = {t.team: t.wait_p95_s for t in first}
    parts = [f"{_wait(before.get(t.team))} → {_wait(t.wait_p95_s)} for {t.team}" for t in tuned]
    return ", ".join(parts) if parts else "unchanged"
