"""``gpufleet what-if``'s core: what Kueue would do right after a new policy's objects are applied.

The twin runs twice on the live Workloads: once on the live queue objects (what Kueue does anyway)
and once with the new policy's objects in their place. ``kubectl apply`` prunes nothing, so an
object the policy does not name stays as it is; an object it names is replaced by what the API
server would store (the caller passes the dry-run's result, or the rendered object). Kueue's
Configuration gets the policy's ``resources`` and ``fairSharing`` merged in, as gpufleet asks for.
Admitted Workloads keep running through a quota change; only the scheduler's next cycles decide
who else gets in and who is preempted.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpufleet.explain.live import Obj, TwinInput, build_twin, key_of, of_kind, workload_state

QUEUE_KINDS = frozenset(
    {"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "PriorityClass", "Namespace"}
)
CONFIG_KEYS = ("resources", "fairSharing")
#: Reasons no end of another Workload can cure: only a change of the queue objects can.
INADMISSIBLE = frozenset({"ExceedsMaxQuota", "NoMatchingFlavor", "Misconfigured", "Suspended"})


@dataclass(frozen=True)
class Change:
    """One Workload whose fate differs: ``before`` says whether the twin does the same without the policy."""

    workload: str
    cluster_queue: str
    reason: str
    message: str
    before: bool


@dataclass(frozen=True)
class Run:
    admitted: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (ClusterQueue, cycle)
    preempted: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # key -> (CQ, preemptor, reason)
    pending: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # key -> (CQ, reason, message)
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class WhatIf:
    admitted: tuple[Change, ...]
    preempted: tuple[Change, ...]
    inadmissible: tuple[Change, ...]
    still_pending: int
    configuration: Obj
    skipped: tuple[str, ...]


def _identity(obj: Obj) -> tuple[str, str]:
    return str(obj.get("kind")), key_of(obj)


def merged_objects(live: Sequence[Obj], replacements: Sequence[Obj]) -> list[Obj]:
    """The live objects with each replacement in place of the object it names, new ones added."""
    by_id = {_identity(o): o for o in replacements if o.get("kind") in QUEUE_KINDS}
    out = [by_id.pop(_identity(o), o) for o in live]
    return out + list(by_id.values())


def merged_configuration(live: Obj | None, rendered: Obj | None) -> Obj | None:
    if rendered is None:
        return live
    config = copy.deepcopy(live) if live else {"apiVersion": rendered.get("apiVersion"), "kind": "Configuration"}
    for key in CONFIG_KEYS:
        if key in rendered:
            config[key] = copy.deepcopy(rendered[key])
        else:
            config.pop(key, None)
    return config


def _run(built: TwinInput) -> Run:
    run = Run(skipped=tuple(f"{s.workload}: {s.message}" for s in built.skipped))
    for result in built.twin.run():
        for p in result.preempted:
            run.preempted.setdefault(p.workload, (p.cluster_queue, p.preemptor, p.reason))
        for a in result.admitted:
            run.admitted.setdefault(a.workload, (a.cluster_queue, result.number))
    for waiting in built.twin.pending():
        run.pending[waiting.workload] = (waiting.cluster_queue, waiting.reason, waiting.message)
    return run


def what_if(
    live: Sequence[Obj], configuration: Obj | None, replacements: Sequence[Obj], rendered_configuration: Obj | None
) -> WhatIf:
    """Compare the twin on the live objects with the twin on them after the policy's objects."""
    new_config = merged_configuration(configuration, rendered_configuration)
    before = _run(build_twin(live, configuration))
    after = _run(build_twin(merged_objects(live, replacements), new_config))
    states = {key_of(w): workload_state(w) for w in of_kind(live, "Workload")}
    admitted = [
        Change(k, cq, "Admitted", f"admitted in cycle {cycle}", k in before.admitted)
        for k, (cq, cycle) in sorted(after.admitted.items())
        if states.get(k) == "Pending"
    ]
    preempted = [
        Change(k, cq, reason, f"preempted for {preemptor}", k in before.preempted)
        for k, (cq, preemptor, reason) in sorted(after.preempted.items())
        if states.get(k) in ("Admitted", "QuotaReserved")
    ]
    inadmissible = [
        Change(k, cq, reason, message, before.pending.get(k, ("", "", ""))[1] in INADMISSIBLE)
        for k, (cq, reason, message) in sorted(after.pending.items())
        if reason in INADMISSIBLE
    ]
    still = sum(1 for _, reason, _ in after.pending.values() if reason not in INADMISSIBLE)
    skipped = tuple(sorted(set(before.skipped) | set(after.skipped)))
    return WhatIf(tuple(admitted), tuple(preempted), tuple(inadmissible), still, new_config or {}, skipped)
