"""``python -m bench tune_bench --fidelity``: do early rungs rank policies as whole runs do, and how many
more trials an hour does pruning give (issue 33, "Multi-fidelity search").

On the bundled example's synthesized trace (``--days``, 2 by default, so it fits this 2-core machine):

1. **Rank correlation per rung**: a sample of policies (the input, the reasoned candidates, then policies
   drawn at random from the search space, seeded) each run once, paused every ``--step-hours``
   (``tune.fidelity.Staged``); for each rung, Spearman's rank correlation between the rung's figure and
   the whole run's, for goodput, the worst team's p95 wait and the halving score. The chosen first rung
   is the earliest from which every later rung's score correlation is at least ``--agree`` (0.8).
2. **Trials per hour before and after**: the same study (``--trials``, one worker, same seed and trace)
   with every trial run whole, then with rungs from the chosen first rung (eta 3); wall time, trials per
   hour, trials stopped early and the recommendation of each.

Every figure is simulated; wall times are this machine's, shared with other work.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import optuna

from gpufleet.demo import workload_spec
from gpufleet.policy import load_policy, resolve
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.measures import common_window, measure
from gpufleet.simulate.pathologies import diagnose
from gpufleet.simulate.run import simulate
from gpufleet.trace import synthesize
from gpufleet.tune import remedies
from gpufleet.tune.fidelity import PRUNED_ATTR, Fidelity, Staged, score
from gpufleet.tune.objectives import worst_p95_s
from gpufleet.tune.space import Space, SpaceError, build_space
from gpufleet.tune.study import StudySpec, open_storage
from gpufleet.tune.tuning import tune

HOUR = 3600
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "fleet.yaml"


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Pearson's correlation of the ranks; None when either side has no spread."""
    ra, rb = ranks(a), ranks(b)
    n = len(ra)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return None if va == 0 or vb == 0 else cov / (va * vb) ** 0.5


def _sample(space: Space, findings: Sequence[object], n: int, seed: int) -> list[dict[str, str]]:
    base = space.base_params()
    picks = [base, *({**base, **c} for c in remedies.candidates(space, findings))]  # type: ignore[arg-type]
    rng = random.Random(seed)
    while len(picks) < n:
        picks.append({k.path: str(rng.choice(k.choices)) for k in space.knobs})
    return picks[:n]


def _fmt(x: float | None) -> str:
    return "    –" if x is None else f"{x:+.2f}"


def correlation(policy_path: Path, days: int, seed: int, policies: int, step_h: float, agree: float) -> int | None:
    policy = load_policy(policy_path)
    fleet = resolve(policy)
    jobs = synthesize(workload_spec(fleet, days=days), seed)
    config = SimulationConfig()
    first = simulate(fleet, jobs, SimulationConfig(mode=Mode.FIRST_APPLY))
    given = simulate(fleet, jobs, config)
    window = common_window([first, given])
    space = build_space(policy)
    findings = diagnose(given, fleet, measure(given, fleet, window))
    step = round(step_h * HOUR)
    rungs = list(range(window[0] + step, window[1], step))
    print(
        f"trace: {len(jobs)} jobs over {days} day(s), seed {seed}; window {window[1] / HOUR:g} h; rungs every {step_h:g} h"
    )
    rows: list[tuple[list[tuple[float, float, tuple[float, float]]], tuple[float, float, tuple[float, float]]]] = []
    started = time.perf_counter()
    for params in _sample(space, findings, policies, seed):
        try:
            tried = space.fleet(params)
        except SpaceError:
            continue
        staged = Staged(tried, jobs, config)
        early = [(m.goodput_gpu_h, worst_p95_s(m) / HOUR, score(m)) for _, m in staged.stages(rungs, window)]
        m = measure(staged.finish(), tried, window)
        rows.append((early, (m.goodput_gpu_h, worst_p95_s(m) / HOUR, score(m))))
    wall = time.perf_counter() - started
    print(f"{len(rows)} valid policies run whole with {len(rungs)} pauses: {wall:,.0f} s wall")
    print(f"{'rung h':>7s} {'goodput ρ':>10s} {'worst p95 ρ':>12s} {'score ρ':>8s}")
    scores: list[float | None] = []
    final_score = [ranks_key(r[1][2]) for r in rows]
    for i, at in enumerate(rungs):
        g = spearman([r[0][i][0] for r in rows], [r[1][0] for r in rows])
        p = spearman([r[0][i][1] for r in rows], [r[1][1] for r in rows])
        s = spearman([ranks_key(r[0][i][2]) for r in rows], final_score)
        print(f"{at / HOUR:7g} {_fmt(g):>10s} {_fmt(p):>12s} {_fmt(s):>8s}")
        scores.append(s)
    # the earliest rung from which every later rung agrees too (one lucky rung is not enough)
    chosen = None
    for i in range(len(rungs) - 1, -1, -1):
        if scores[i] is None or scores[i] < agree:  # type: ignore[operator]
            break
        chosen = rungs[i] - window[0]
    print(
        "chosen first rung: "
        + (
            "none (no rung agrees; every trial runs whole)"
            if chosen is None
            else f"{chosen / HOUR:g} h (score ρ ≥ {agree:g} there and at every later rung)"
        )
    )
    return chosen


def ranks_key(s: tuple[float, float]) -> float:
    """The halving score as one number that sorts as the tuple does (p95 first; goodput within 1e6 GPU-h)."""
    return s[0] * 1e6 + s[1]


def throughput(policy_path: Path, days: int, seed: int, trials: int, first_s: int | None, min_jain: float) -> None:
    """The same study with whole runs, then with rungs: the search's own wall time (the three worlds
    before it are the same in both and left out), how many trials stopped where, and the answer."""
    policy = load_policy(policy_path)
    jobs = synthesize(workload_spec(resolve(policy), days=days), seed)
    for label, fid in (("whole runs", None), ("rungs", None if first_s is None else Fidelity(first_s=first_s))):
        if label == "rungs" and fid is None:
            print("rungs: skipped (no rung agrees)")
            continue
        marks: list[float] = []
        with tempfile.TemporaryDirectory() as tmp:
            spec = StudySpec(str(Path(tmp) / "s.journal"), trials=trials, jobs=1, seed=seed)
            t = tune(
                policy,
                jobs,
                spec,
                fidelity=fid,
                simplify=False,
                stage=_marker(marks),
            )
            ended = time.perf_counter()
            study = optuna.load_study(study_name=spec.name, storage=open_storage(spec.storage))
            stops = [
                tr.user_attrs[PRUNED_ATTR]["why"][0].split(" ")[0]
                for tr in study.trials
                if PRUNED_ATTR in tr.user_attrs
            ]
        search_s = (marks[2] if len(marks) > 2 else ended) - marks[1]
        rec = t.recommended
        best = min((c for c in t.trials if c.feasible), key=lambda c: (c.worst_p95_h, -c.goodput_gpu_h), default=None)
        figures = (
            "none"
            if rec is None
            else f"trial {rec.number}: {rec.goodput_gpu_h:,.0f} GPU-h, worst p95 {rec.worst_p95_h:g} h"
        )
        searched = len(t.trials) + t.pruned - 1
        print(
            f"{label:10s}: {searched} trials searched in {search_s:,.0f} s wall: {searched / search_s * HOUR:,.0f} trials/hour; "
            f"completed {len(t.trials) - 1} ({sum(c.feasible for c in t.trials)} feasible), "
            f"stopped {dict(Counter(stops))}, invalid {t.pruned - len(stops)}; recommended {figures}"
            + ("" if best is None else f"; best feasible trial {best.number}")
        )


def _marker(into: list[float]) -> Callable[[str], None]:
    return lambda _text: into.append(time.perf_counter())


def main(days: int, seed: int, policies: int, step_h: float, agree: float, trials: int, min_jain: float = 0.95) -> None:
    started = time.perf_counter()
    chosen = correlation(EXAMPLE, days, seed, policies, step_h, agree)
    throughput(EXAMPLE, days, seed, trials, chosen, min_jain)
    print(f"bench wall time {time.perf_counter() - started:,.0f} s; all figures simulated")
