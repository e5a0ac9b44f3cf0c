"""The recommended policy against the input: each changed setting, the pathology it removes, and
what the simulation measured before and after.

A change names the findings of the input policy (``diagnose``) whose ``settings`` it touches, and
whether the tuned run still shows them. Its effect is the measure that finding is about (the most
preemptions of one job for a preemption loop, the usable idle GPU-hours for quota held back by
limits, ...), before and after, both simulated; a change no finding points at shows the two
objectives instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.simulate.measures import Measures
from gpufleet.simulate.pathologies import Finding, Reason
from gpufleet.tune.objectives import worst_p95_s

BETTER, WORSE, SAME = "better", "worse", "unchanged"


@dataclass(frozen=True)
class Effect:
    measure: str
    before: float
    after: float
    higher_is_better: bool = False  # goodput; every finding's measure is better lower

    @property
    def direction(self) -> str:
        """``BETTER``, ``WORSE`` or ``SAME``, judged on the figures as printed (so the word and the
        numbers beside it never disagree)."""
        before, after = _shown(self.before), _shown(self.after)
        if before == after:
            return SAME
        return BETTER if (after > before) == self.higher_is_better else WORSE

    def text(self) -> str:
        return f"{self.measure} {_num(self.before)} → {_num(self.after)} ({self.direction}, simulated)"


@dataclass(frozen=True)
class Change:
    setting: str
    before: str
    after: str
    removes: tuple[Reason, ...]  # the input's pathologies this setting drives and the tuned run lacks
    eases: tuple[Reason, ...]  # ... that the tuned run still shows, with a better figure
    effects: tuple[Effect, ...]
    worsens: tuple[Reason, ...] = ()  # ... whose figure the tuned run makes worse
    leaves: tuple[Reason, ...] = ()  # ... still shown, with the same figure
    cluster: str = ""  # a federated policy: the cluster the setting lives in (``clusters.EVERY`` for fleet-wide)

    def explanation(self) -> str:
        """One line: each word (removes, eases, worsens, leaves unchanged) with the figures it rests on."""
        words = (("removes", self.removes), ("eases", self.eases), ("worsens", self.worsens), ("leaves", self.leaves))
        parts = []
        for word, reasons in words:
            if reasons:
                tail = " unchanged" if word == "leaves" else ""
                parts.append(f"{word} {', '.join(r.value for r in reasons)}{tail}")
        label = "; ".join(parts) or "no finding points at it"
        return f"{label}: " + "; ".join(e.text() for e in self.effects)

    @property
    def where(self) -> str:
        """The setting, with its cluster when the policy has several."""
        return f"{self.setting} [{self.cluster}]" if self.cluster else self.setting

    def as_dict(self) -> dict[str, Any]:
        return {
            "setting": self.setting,
            **({"cluster": self.cluster} if self.cluster else {}),
            "before": self.before,
            "after": self.after,
            "removes": [r.value for r in self.removes],
            "eases": [r.value for r in self.eases],
            "worsens": [r.value for r in self.worsens],
            "leaves": [r.value for r in self.leaves],
            "effects": [
                {"measure": e.measure, "before": e.before, "after": e.after, "direction": e.direction}
                for e in self.effects
            ],
        }


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.3g}"


def _shown(x: float) -> float:
    return float(_num(x).replace(",", ""))


def _key(path: str) -> tuple[str, str]:
    """(scope, field): ``teams[a].quota[p].borrowingLimit`` → (``teams[a].quota[p]``, ``borrowingLimit``)."""
    scope, _, field = path.rpartition(".")
    return scope, field


def touches(setting: str, knob: str) -> bool:
    """Whether a finding's setting path names this knob: the same path, one inside the other, or the
    same field where either is fleet-wide (the policy sets preemption for every ClusterQueue)."""
    if setting == knob or setting.startswith(knob + ".") or knob.startswith(setting + "."):
        return True
    (s_scope, s_field), (k_scope, k_field) = _key(setting), _key(knob)
    if s_field != k_field:
        return False
    fleet_wide = ("queueing", "")
    if s_scope in fleet_wide or k_scope in fleet_wide:
        return True
    # a team-level finding ("teams[a].borrowingLimit") matches that team's per-pool limits
    return k_scope.startswith(s_scope + ".") or s_scope.startswith(k_scope + ".")


def effect_of(reason: Reason, before: Measures, after: Measures, subjects: Sequence[str]) -> Effect:
    if reason is Reason.PREEMPTION_LOOP:
        return Effect("most preemptions of one job", before.preemptions_max, after.preemptions_max)
    if reason is Reason.SERVING_STARVATION:
        return Effect(
            "serving starved replica-min", before.serving_starved_replica_min, after.serving_starved_replica_min
        )
    if reason is Reason.NEVER_ADMISSIBLE:
        return Effect(
            "never-admissible jobs",
            sum(t.never_admissible for t in before.teams),
            sum(t.never_admissible for t in after.teams),
        )
    pools = [p for p in subjects if p in before.usable_idle_gpu_h] or list(before.usable_idle_gpu_h)
    return Effect(
        f"usable idle GPU-h ({', '.join(pools)})" if pools else "usable idle GPU-h",
        round(sum(before.usable_idle_gpu_h.get(p, 0.0) for p in pools), 1),
        round(sum(after.usable_idle_gpu_h.get(p, 0.0) for p in pools), 1),
    )


def diff(
    *,
    base: Mapping[str, str],
    tuned: Mapping[str, str],
    before: Measures,
    after: Measures,
    found_before: Sequence[Finding],
    found_after: Sequence[Finding],
) -> list[Change]:
    """One ``Change`` per knob whose value differs, in the space's order."""
    still = {f.reason for f in found_after}
    changes = []
    for path, value in tuned.items():
        old = base.get(path)
        if old is None or old == value:
            continue
        driving = [f for f in found_before if any(touches(s, path) for s in f.settings)]
        reasons = tuple(dict.fromkeys(f.reason for f in driving))
        effects = [
            effect_of(r, before, after, [s for f in driving if f.reason is r for s in f.subjects]) for r in reasons
        ]
        if not effects:
            effects = [
                Effect("goodput GPU-h", round(before.goodput_gpu_h, 1), round(after.goodput_gpu_h, 1), True),
                Effect(
                    "worst team p95 wait h", round(worst_p95_s(before) / 3600, 1), round(worst_p95_s(after) / 3600, 1)
                ),
            ]
        changes.append(judged(path, old, value, reasons=reasons, still=still, effects=effects))
    return changes


def judged(
    setting: str, before: str, after: str, *, reasons: Sequence[Reason], still: set[Reason], effects: Sequence[Effect]
) -> Change:
    """The word for each finding, from its measured figure: worse is "worsens" whether or not the
    finding is still there; better or the same with the finding gone is "removes"; better with it still
    there "eases"; the same with it still there "leaves ... unchanged"."""
    words: dict[str, list[Reason]] = {"removes": [], "eases": [], "worsens": [], "leaves": []}
    for reason, effect in zip(reasons, effects, strict=False):  # no finding: the objectives, no word
        if effect.direction == WORSE:
            words["worsens"].append(reason)
        elif reason not in still:
            words["removes"].append(reason)
        elif effect.direction == BETTER:
            words["eases"].append(reason)
        else:
            words["leaves"].append(reason)
    return Change(
        setting=setting,
        before=before,
        after=after,
        removes=tuple(words["removes"]),
        eases=tuple(words["eases"]),
        effects=tuple(effects),
        worsens=tuple(words["worsens"]),
        leaves=tuple(words["leaves"]),
    )
