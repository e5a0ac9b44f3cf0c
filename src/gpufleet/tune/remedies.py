"""Candidate policies worked out by reasoning, tried before the sampler's own choices.

A consultant's first moves: lift the borrowing and lending limits that hold quota back, stop the
preemptions that feed a reclaim/preempt-back loop, and both together; keep reclaim but let the
reclaiming workload hold what its victims free (Kueue's PrioritizePreemptorWorkloads gate, the
remedy that does not give up guaranteed quota); and, where the input
policy's findings name the settings that drive them, exactly those settings. A candidate that stops
the fleet's reclaim stops ``borrowWithinCohort`` with it (Kueue refuses the one without the other);
a ``QuotaWithoutNode`` finding asks for ``scheduling.nodeScoring: MostAllocated`` (packed nodes);
the per-team preemption knobs and the waitForPodsReady timeout are left to the sampler. The remedies
the findings name come combined first and each alone last, so every one is tried before the sampler
explores (the combinations first: the demo's budget takes the first three). Each
candidate is a set of knob values (``Space`` paths); ``seed_study`` enqueues them once per study.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.policy.model import UNLIMITED
from gpufleet.simulate.pathologies import Finding
from gpufleet.tune.diff import touches
from gpufleet.tune.space import FLEET, Space

Params = dict[str, str]

_CALM = {"queueing.withinClusterQueue": "Never", "queueing.reclaimWithinCohort": "Never"}
_PREEMPTOR_FIRST = {"queueing.prioritizePreemptorWorkloads": "true"}


def _permissive(path: str, choices: Sequence[str]) -> str | None:
    """The value of a knob that holds nothing back, preempts least, or packs nodes (QuotaWithoutNode's
    remedy: gangs find whole nodes)."""
    if path.endswith(("borrowingLimit", "lendingLimit")):
        return UNLIMITED if UNLIMITED in choices else None
    wanted = {
        "queueing.withinClusterQueue": "Never",
        "queueing.reclaimWithinCohort": "Never",
        "queueing.borrowWithinCohort": "Never",
        "queueing.preemptionStrategies": "LessThanOrEqualToFinalShare",
        "scheduling.nodeScoring": "MostAllocated",
    }.get(path)
    return wanted if wanted in choices else None


def _limits(space: Space, pools: Sequence[str] | None = None) -> Params:
    params: Params = {}
    for knob in space.knobs:
        if not knob.path.endswith(("borrowingLimit", "lendingLimit")) or UNLIMITED not in knob.choices:
            continue
        if pools is None or any(f"quota[{p}]" in knob.path for p in pools):
            params[knob.path] = UNLIMITED
    return params


def _known(space: Space, params: Params) -> Params:
    paths = {k.path: k.choices for k in space.knobs}
    return {k: v for k, v in params.items() if k in paths and v in paths[k]}


def _without_borrowing_preemption(space: Space, params: Params) -> Params:
    """Kueue refuses borrowWithinCohort without reclaim: where a candidate stops the fleet's reclaim,
    it stops borrowing preemption too, the fleet's and that of each team that follows the fleet's reclaim."""
    if params.get("queueing.reclaimWithinCohort") != "Never":
        return params
    base = space.base_params()
    out = {**params, "queueing.borrowWithinCohort": "Never"}
    for knob in space.knobs:
        head, _, field = knob.path.rpartition(".")
        if field != "borrowWithinCohort" or not head.endswith("].preemption"):
            continue
        follows = params.get(f"{head}.reclaimWithinCohort", base[f"{head}.reclaimWithinCohort"]) == FLEET
        if follows and base[knob.path] == "LowerPriority":
            out[knob.path] = "Never"
    return out


def remedy(space: Space, finding: Finding) -> Params:
    """The settings one finding names, each set to the value that holds nothing back and preempts least."""
    out: Params = {}
    for knob in space.knobs:
        if any(touches(s, knob.path) for s in finding.settings):
            value = _permissive(knob.path, knob.choices)
            if value is not None:
                out[knob.path] = value
    return out


def candidates(space: Space, findings: Sequence[Finding] = ()) -> list[Params]:
    """Distinct candidates that differ from the input, most targeted first."""
    base = space.base_params()
    limited = sorted(
        {
            k.path.split("quota[")[1].split("]")[0]
            for k in space.knobs
            if "quota[" in k.path and base[k.path] != UNLIMITED
        }
    )
    alone = [remedy(space, f) for f in findings]
    found: Params = {k: v for r in alone for k, v in r.items()}  # every finding's remedy, combined
    options = [
        found,
        {**_limits(space, limited), **_CALM},  # the limited pools without limits, no preemption loop
        {**_limits(space), **_CALM},
        _CALM,
        {**_limits(space, limited), **_PREEMPTOR_FIRST},  # reclaim kept, the preemptor holds its quota
        _limits(space, limited),
        *alone,  # each finding's remedy alone, after the combinations (the demo's budget takes the first three)
    ]
    out: list[Params] = []
    for option in options:
        params = _known(space, _without_borrowing_preemption(space, option))
        if params and any(base[k] != v for k, v in params.items()) and params not in out:
            out.append(params)
    return out
