"""The knobs ``gpufleet tune`` turns: each a setting of the fleet policy, with the values it may take.

Only what the policy file can say is searched, so every trial is a policy a user can apply
(``plan``, ``render``): borrowing and lending limits per team and pool, the fleet's preemption
policies (``withinClusterQueue``, ``reclaimWithinCohort``, ``borrowWithinCohort``'s policy with the
input's threshold kept) and each team's override of them (``fleet``: the team follows the fleet),
fair sharing on or off and its preemption strategies, Kueue's ``PrioritizePreemptorWorkloads`` gate
(the remedy for a reclaim loop that keeps reclaim), waitForPodsReady's timeout, kube-scheduler's
node scoring (``scheduling.nodeScoring``: LeastAllocated or MostAllocated, which render turns into a
scheduler profile), the MIG layout of each MIG pool, the time-slice replicas of each time-sliced
pool and the value of each priority class. ``simulate --placement FragmentationAware`` is not
searched: it is gpufleet's own scoring model, which no scheduler runs, so a recommendation naming it
could not be applied.

Every value is a string (Optuna stores categorical choices by index; strings keep the study
readable in any storage). Each knob's choices include the input policy's own value, and a choice
that alone makes the policy invalid (a layout that drops a profile a team has quota in) is left
out up front; a combination that is invalid all the same is rejected per trial (``SpaceError``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import ValidationError

from gpufleet.gpus import lookup
from gpufleet.gpus.mig import maximal_layouts, standard_layouts
from gpufleet.policy import Fleet, FleetPolicy, resolve
from gpufleet.policy.checks import cross_check
from gpufleet.policy.fleet import facts_for
from gpufleet.policy.model import KUEUE_FAIR_SHARING_STRATEGIES, UNLIMITED, NodeScoring, PoolQuota
from gpufleet.policy.slicing import decide
from gpufleet.simulate.config import PodsReady
from gpufleet.tune.clusters import allowed

Apply = Callable[[dict[str, Any], str], None]  # edits a policy's plain data in place

BOTH = "both"
FLEET = "fleet"  # a team's preemption field left out: its ClusterQueue follows queueing
_STRATEGIES: dict[str, list[str]] = {
    BOTH: list(KUEUE_FAIR_SHARING_STRATEGIES),
    **{s: [s] for s in KUEUE_FAIR_SHARING_STRATEGIES},
}
_WITHIN = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
_RECLAIM = ("Never", "LowerPriority", "Any")
_BORROW = ("Never", "LowerPriority")
_REPLICAS = ("2", "4", "8")
_TIMEOUTS = ("300", "600", "1800", "3600")  # 5 min to an hour; Kueue's default is 30 min
KUEUE_PODS_READY_TIMEOUT_S = PodsReady().timeout_s  # Kueue's default (simulate.config)
_NODE_SCORINGS: tuple[NodeScoring, ...] = get_args(NodeScoring)  # kube-scheduler's NodeResourcesFit strategies


class SpaceError(ValueError):
    """A combination of choices that does not make a valid policy."""


@dataclass(frozen=True)
class Knob:
    """One setting: its policy path (how the diff and the findings name it) and its choices."""

    path: str  # e.g. "teams[research].quota[h100-train].borrowingLimit"
    choices: tuple[str, ...]
    apply: Apply

    def __post_init__(self) -> None:
        if len(set(self.choices)) != len(self.choices):
            raise ValueError(f"{self.path}: duplicate choices {self.choices}")


@dataclass(frozen=True)
class Space:
    """The input policy and the knobs around it."""

    base: FleetPolicy
    knobs: tuple[Knob, ...]

    def knob(self, path: str) -> Knob:
        return next(k for k in self.knobs if k.path == path)

    def base_params(self) -> dict[str, str]:
        """The input policy's value of every knob (trial 0)."""
        return {k.path: value_of(self.base, k.path) for k in self.knobs}

    def apply(self, params: Mapping[str, str]) -> FleetPolicy:
        """The input policy with ``params`` applied, validated field by field and across fields."""
        data = self.base.model_dump(mode="python", exclude_unset=True)
        for knob in self.knobs:
            value = params.get(knob.path)
            if value is not None and value != value_of(self.base, knob.path):
                knob.apply(data, value)
        try:
            policy = FleetPolicy.model_validate(data)
        except ValidationError as exc:
            raise SpaceError(str(exc)) from None
        problems = cross_check(policy)
        if problems:
            raise SpaceError("; ".join(f"{'.'.join(map(str, loc))}: {msg}" for loc, msg in problems))
        return policy

    def fleet(self, params: Mapping[str, str]) -> Fleet:
        return resolve(self.apply(params))


def _item(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(i for i in items if i["name"] == name)


def _quota(data: dict[str, Any], team: str, pool: str) -> dict[str, Any]:
    quota: dict[str, Any] = _item(data["teams"], team)["quota"][pool]
    return quota


def _limit(value: str) -> int | str:
    return UNLIMITED if value == UNLIMITED else int(value)


def value_of(policy: FleetPolicy, path: str) -> str:
    """A knob's value in ``policy``, spelled as its choices are."""
    head, _, field = path.rpartition(".")
    if head == "queueing":
        q = policy.queueing
        if field == "preemptionStrategies":
            return BOTH if len(q.preemptionStrategies) == 2 else q.preemptionStrategies[0]
        if field == "borrowWithinCohort":
            return q.borrowWithinCohort.policy
        value = getattr(q, field)
        return str(value).lower() if isinstance(value, bool) else str(value)
    if path == "scheduling.nodeScoring":
        return policy.scheduling.nodeScoring
    if head == "queueing.waitForPodsReady":
        return str(policy.queueing.waitForPodsReady.timeoutSeconds or KUEUE_PODS_READY_TIMEOUT_S)
    if head.startswith("teams[") and head.endswith("].preemption"):
        team = policy.team(head[len("teams[") : -len("].preemption")])
        assert team is not None
        own = getattr(team.preemption, field, None)
        return FLEET if own is None else str(own.policy if field == "borrowWithinCohort" else own)
    if head.startswith("teams["):
        team_name, pool_name = head[len("teams[") :].split("].quota[")
        team = policy.team(team_name)
        assert team is not None
        return str(getattr(team.quota[pool_name.rstrip("]")], field))
    if head.startswith("pools["):
        pool = policy.pool(head[len("pools[") :].split("]")[0])
        assert pool is not None
        if field == "layout":
            return _layout_text(getattr(pool.slicing, "layout", ""))
        return str(decide(facts_for(policy, pool)).replicas)  # the decision table's when unset
    if head.startswith("priorityClasses["):
        name = head[len("priorityClasses[") : -1]
        return str(next(p.value for p in policy.priorityClasses if p.name == name))
    raise KeyError(path)


def _layout_text(layout: str | Mapping[str, int]) -> str:
    return layout if isinstance(layout, str) else ",".join(f"{k}={v}" for k, v in sorted(layout.items()))


def _layout_value(text: str) -> str | dict[str, int]:
    if "=" not in text:
        return text
    return {k: int(v) for k, v in (pair.split("=") for pair in text.split(","))}


def _queueing_knobs(policy: FleetPolicy) -> list[Knob]:
    def setter(field: str, convert: Callable[[str], Any]) -> Apply:
        def apply(data: dict[str, Any], value: str) -> None:
            data.setdefault("queueing", {})[field] = convert(value)

        return apply

    return [
        Knob("queueing.fairSharing", ("true", "false"), setter("fairSharing", lambda v: v == "true")),
        Knob(
            "queueing.preemptionStrategies",
            tuple(_STRATEGIES),
            setter("preemptionStrategies", lambda v: list(_STRATEGIES[v])),
        ),
        Knob("queueing.withinClusterQueue", _WITHIN, setter("withinClusterQueue", str)),
        Knob("queueing.reclaimWithinCohort", _RECLAIM, setter("reclaimWithinCohort", str)),
        Knob(
            "queueing.prioritizePreemptorWorkloads",
            ("false", "true"),
            setter("prioritizePreemptorWorkloads", lambda v: v == "true"),
        ),
        Knob("queueing.borrowWithinCohort", _BORROW, setter("borrowWithinCohort", _borrow(policy))),
        Knob(
            "queueing.waitForPodsReady.timeoutSeconds",
            _ordered([value_of(policy, "queueing.waitForPodsReady.timeoutSeconds"), *_TIMEOUTS]),
            setter("waitForPodsReady", lambda v: {"timeoutSeconds": int(v)}),
        ),
    ]


def _node_scoring_knob(policy: FleetPolicy) -> Knob:
    """kube-scheduler's scoring, the input's first: MostAllocated packs nodes so gangs find whole ones."""

    def apply(data: dict[str, Any], value: str) -> None:
        data.setdefault("scheduling", {})["nodeScoring"] = value

    return Knob("scheduling.nodeScoring", _ordered([policy.scheduling.nodeScoring, *_NODE_SCORINGS]), apply)


def _borrow(policy: FleetPolicy) -> Callable[[str], dict[str, Any]]:
    """``borrowWithinCohort`` with the policy word searched; the input's threshold stays with LowerPriority."""
    threshold = policy.queueing.borrowWithinCohort.maxPriorityThreshold

    def block(value: str) -> dict[str, Any]:
        if value == "Never" or threshold is None:
            return {"policy": value}
        return {"policy": value, "maxPriorityThreshold": threshold}

    return block


def _team_preemption_knobs(policy: FleetPolicy) -> list[Knob]:
    """Per team, each preemption field: the fleet's (the field left out) or one of Kueue's values.
    A team's ``borrowWithinCohort`` keeps the threshold it or the fleet has."""
    knobs: list[Knob] = []
    for team in policy.teams:

        def setter(field: str, convert: Callable[[str], Any], name: str = team.name) -> Apply:
            def apply(data: dict[str, Any], value: str) -> None:
                item = _item(data["teams"], name)
                own = dict(item.get("preemption") or {})
                if value == FLEET:
                    own.pop(field, None)
                else:
                    own[field] = convert(value)
                if own:
                    item["preemption"] = own
                else:
                    item.pop("preemption", None)

            return apply

        own = team.preemption.borrowWithinCohort if team.preemption else None
        threshold = (own or policy.queueing.borrowWithinCohort).maxPriorityThreshold

        def borrow(value: str, threshold: int | None = threshold) -> dict[str, Any]:
            return (
                {"policy": value}
                if value == "Never" or threshold is None
                else {"policy": value, "maxPriorityThreshold": threshold}
            )

        base = f"teams[{team.name}].preemption"
        knobs += [
            Knob(f"{base}.withinClusterQueue", (FLEET, *_WITHIN), setter("withinClusterQueue", str)),
            Knob(f"{base}.reclaimWithinCohort", (FLEET, *_RECLAIM), setter("reclaimWithinCohort", str)),
            Knob(f"{base}.borrowWithinCohort", (FLEET, *_BORROW), setter("borrowWithinCohort", borrow)),
        ]
    return knobs


def _ordered(values: list[str]) -> tuple[str, ...]:
    seen: list[str] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return tuple(seen)


def _limit_knobs(policy: FleetPolicy, fleet: Fleet) -> list[Knob]:
    knobs: list[Knob] = []
    for team in policy.teams:
        for pool_name, quota in team.quota.items():
            cap = fleet.pools.get(pool_name)
            if cap is None:
                continue
            size = max(cap.units.values(), default=0)
            guaranteed = _guaranteed(quota)
            base = f"teams[{team.name}].quota[{pool_name}]"

            def setter(field: str, team_name: str = team.name, pool: str = pool_name) -> Apply:
                def apply(data: dict[str, Any], value: str) -> None:
                    _quota(data, team_name, pool)[field] = _limit(value)

                return apply

            borrow = _ordered([str(quota.borrowingLimit), UNLIMITED, "0", str(size // 2), str(size)])
            knobs.append(Knob(f"{base}.borrowingLimit", borrow, setter("borrowingLimit")))
            if guaranteed > 0:
                lend = _ordered([str(quota.lendingLimit), UNLIMITED, "0", str(guaranteed // 2)])
                knobs.append(Knob(f"{base}.lendingLimit", lend, setter("lendingLimit")))
    return knobs


def _guaranteed(quota: PoolQuota) -> int:
    return max([quota.gpus or 0, *quota.mig.values()])


def _slicing(pool_name: str, make: Callable[[str], dict[str, Any]]) -> Apply:
    def apply(data: dict[str, Any], value: str) -> None:
        _item(data["pools"], pool_name)["slicing"] = make(value)

    return apply


def _slicing_knobs(policy: FleetPolicy, fleet: Fleet) -> list[Knob]:
    knobs: list[Knob] = []
    for pool in policy.pools:
        cap = fleet.pools[pool.name]
        path = f"pools[{pool.name}].slicing"

        if cap.decision.mode == "mig" and pool.slicing is not None:
            gpu = lookup(pool.gpu)
            assert gpu is not None
            current = _layout_text(getattr(pool.slicing, "layout", ""))
            standard = {n: layout for n, layout in standard_layouts(gpu).items() if layout}
            names = list(standard)
            names += [_layout_text(dict(x)) for x in maximal_layouts(gpu) if x not in standard.values()]
            apply = _slicing(pool.name, lambda v: {"mode": "mig", "layout": _layout_value(v)})
            choices = _ordered([current, *names])
            knobs.append(Knob(f"{path}.layout", _valid(policy, apply, choices, current), apply))
        elif cap.decision.mode == "timeslice":
            current = str(cap.decision.replicas)
            apply = _slicing(pool.name, lambda v: {"mode": "timeslice", "replicas": int(v)})
            choices = _ordered([current, *_REPLICAS])
            knobs.append(Knob(f"{path}.replicas", _valid(policy, apply, choices, current), apply))
    return knobs


def _valid(policy: FleetPolicy, apply: Apply, choices: tuple[str, ...], current: str) -> tuple[str, ...]:
    """The choices that, alone, keep the policy valid (the team quotas must still fit the layout)."""
    kept = [current]
    for choice in choices:
        if choice == current:
            continue
        data = policy.model_dump(mode="python", exclude_unset=True)
        apply(data, choice)
        try:
            candidate = FleetPolicy.model_validate(data)
        except ValidationError:
            continue
        if not cross_check(candidate):
            kept.append(choice)
    return tuple(kept)


def _priority_knobs(policy: FleetPolicy) -> list[Knob]:
    values = sorted({p.value for p in policy.priorityClasses})
    if len(values) < 2:
        return []
    knobs = []
    for pc in policy.priorityClasses:

        def apply(data: dict[str, Any], value: str, name: str = pc.name) -> None:
            _item(data["priorityClasses"], name)["value"] = int(value)

        knobs.append(Knob(f"priorityClasses[{pc.name}].value", _ordered([str(pc.value), *map(str, values)]), apply))
    return knobs


def build_space(policy: FleetPolicy) -> Space:
    """Every knob of ``policy`` (in the order a consultant would look at them)."""
    fleet = resolve(policy)
    knobs = [
        *_queueing_knobs(policy),
        _node_scoring_knob(policy),
        *_team_preemption_knobs(policy),
        *_limit_knobs(policy, fleet),
        *_slicing_knobs(policy, fleet),
        *_priority_knobs(policy),
    ]
    kept = (k for k in knobs if len(k.choices) > 1 and allowed(policy, k.path))  # a team's quota stays in its residency
    return Space(base=policy, knobs=tuple(kept))
