"""From the study's trials to one recommendation, and the Pareto front it was chosen from.

The front holds the feasible trials no other feasible trial beats on both objectives. The
recommendation is, among the feasible trials at least as good as the input policy on goodput, the
one with the shortest worst-team p95 wait (then the higher goodput, then the fewer changed
settings, then the earlier trial); with none of those, the feasible trial with the highest
goodput. The input policy is trial 0 and among those candidates when it is feasible, so then the
recommendation is never worse than it on either objective (at worst it is the input itself).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpufleet.tune.objectives import feasible
from gpufleet.tune.trial import CONSTRAINTS_ATTR, MEASURES_ATTR, STRANDED_ATTR

if TYPE_CHECKING:  # optuna loads with a study, not with every command that prints one's output
    import optuna
    from optuna.trial import FrozenTrial


@dataclass(frozen=True)
class Candidate:
    number: int
    params: dict[str, str]
    goodput_gpu_h: float
    worst_p95_h: float
    constraints: tuple[float, ...]
    measures: dict[str, Any]
    source: str  # "input", "candidate" (enqueued by reasoning) or "search"
    stranded: int = 0  # protected jobs the trial makes never-admissible (``strand``)

    @property
    def feasible(self) -> bool:
        return feasible(self.constraints)


def candidates(study: optuna.Study) -> list[Candidate]:
    """Every completed trial with its figures, in trial order."""
    from optuna.trial import TrialState

    out = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        out.append(_candidate(t))
    return out


def _candidate(t: FrozenTrial) -> Candidate:
    assert t.values is not None
    return Candidate(
        number=t.number,
        params={k: str(v) for k, v in t.params.items()},
        goodput_gpu_h=float(t.values[0]),
        worst_p95_h=float(t.values[1]),
        constraints=tuple(t.user_attrs.get(CONSTRAINTS_ATTR, (1.0,))),
        measures=dict(t.user_attrs.get(MEASURES_ATTR, {})),
        source=str(t.user_attrs.get("source", "search")),
        stranded=int(t.user_attrs.get(STRANDED_ATTR, 0)),
    )


def _dominates(a: Candidate, b: Candidate) -> bool:
    better_or_equal = a.goodput_gpu_h >= b.goodput_gpu_h and a.worst_p95_h <= b.worst_p95_h
    return better_or_equal and (a.goodput_gpu_h > b.goodput_gpu_h or a.worst_p95_h < b.worst_p95_h)


def pareto_front(trials: Sequence[Candidate]) -> list[Candidate]:
    """The feasible trials no feasible trial dominates; one per distinct pair of objective values."""
    ok = [c for c in trials if c.feasible]
    front: list[Candidate] = []
    seen: set[tuple[float, float]] = set()
    for c in sorted(ok, key=lambda c: (-c.goodput_gpu_h, c.worst_p95_h, c.number)):
        key = (c.goodput_gpu_h, c.worst_p95_h)
        if key in seen or any(_dominates(o, c) for o in ok):
            continue
        seen.add(key)
        front.append(c)
    return front


def changed(params: Mapping[str, str], base: Mapping[str, str]) -> int:
    return sum(1 for k, v in params.items() if base.get(k) != v)


def ranked(trials: Sequence[Candidate], base: Mapping[str, str]) -> list[Candidate]:
    """The feasible trials in the order of the recommendation (the module's docstring), one per
    distinct set of choices: the held-out weeks (``judge``) take them from the top."""
    ok = [c for c in trials if c.feasible]
    given = next((c for c in trials if c.source == "input"), None)
    floor = given.goodput_gpu_h if given is not None else 0.0
    keeping = sorted(
        (c for c in ok if c.goodput_gpu_h >= floor),
        key=lambda c: (c.worst_p95_h, -c.goodput_gpu_h, changed(c.params, base), c.number),
    )
    rest = sorted(
        (c for c in ok if c.goodput_gpu_h < floor),
        key=lambda c: (-c.goodput_gpu_h, c.worst_p95_h, changed(c.params, base), c.number),
    )
    out: list[Candidate] = []
    for c in (*keeping, *rest):
        if all(c.params != o.params for o in out):
            out.append(c)
    return out


def recommend(trials: Sequence[Candidate], base: Mapping[str, str]) -> Candidate | None:
    """The trial to recommend (None when no trial met the constraints)."""
    order = ranked(trials, base)
    return order[0] if order else None
