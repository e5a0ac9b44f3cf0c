"""The slicing decision table: which row decides, what it picks, and when a declared choice is flagged."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.gpus import lookup
from gpufleet.policy.model import Pool
from gpufleet.policy.slicing import TABLE, Facts, decide


def facts(gpu: str = "A100-SXM4-80GB", goal: int | None = None, **fields: Any) -> Facts:
    base: dict[str, Any] = {"name": "p", "gpu": gpu, "nodes": 1, "gpusPerNode": 8, "role": "batch"}
    model = lookup(gpu)
    assert model is not None
    return Facts(pool=Pool.model_validate({**base, **fields}), gpu=model, serving_latency_goal_ms=goal)


# (id, facts, expected mode, expected reason, flagged)
CASES = [
    ("training-full", facts(role="training", workloads=["training"]), "full", "TrainingNeedsFullCards", False),
    ("training-role-default", facts(role="training"), "full", "TrainingNeedsFullCards", False),
    ("large-context-full", facts(workloads=["large-context", "dev"]), "full", "TrainingNeedsFullCards", False),
    ("isolation-mig", facts(isolateTeams=True, workloads=["batch-eval"]), "mig", "IsolationNeedsMIG", False),
    ("isolation-no-mig", facts("L40S", isolateTeams=True, workloads=["dev"]), "full", "IsolationWithoutMIG", False),
    (
        "dev-timeslice",
        facts("L40S", role="dev", workloads=["dev", "small-inference"]),
        "timeslice",
        "JitterTolerantSharing",
        False,
    ),
    ("dev-role-default", facts("L4", role="dev"), "timeslice", "JitterTolerantSharing", False),
    ("eval-on-mig-card", facts(workloads=["batch-eval", "inference"]), "mig", "SmallJobsOnMIG", False),
    ("eval-on-plain-card", facts("L40S", workloads=["batch-eval"]), "full", "DefaultFullCard", False),
    ("serving-goal", facts("H100-SXM5-80GB", goal=200, role="serving"), "full", "ServingLatencyGoal", False),
    (
        "serving-goal-timesliced-is-flagged",
        facts("H100-SXM5-80GB", goal=200, role="serving", slicing={"mode": "timeslice", "replicas": 4}),
        "timeslice",
        "ServingLatencyGoal",
        True,
    ),
    ("serving-no-goal", facts("L40S", role="serving"), "full", "ServingReserved", False),
    (
        "training-declared-mig-is-flagged",
        facts(role="training", workloads=["training"], slicing={"mode": "mig", "layout": "all-1g.10gb"}),
        "mig",
        "TrainingNeedsFullCards",
        True,
    ),
    (
        "isolation-declared-full-is-accepted",
        facts(isolateTeams=True, slicing={"mode": "full"}),
        "full",
        "IsolationNeedsMIG",
        False,
    ),
]


@pytest.mark.parametrize(("f", "mode", "reason", "flagged"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decision_table(f: Facts, mode: str, reason: str, flagged: bool) -> None:
    decision = decide(f)
    assert (decision.mode, decision.reason, decision.flagged) == (mode, reason, flagged)
    assert decision.message
    if flagged:
        assert f"the table says {next(r.prefers for r in TABLE if r.reason == reason)}" in decision.flag_message


@pytest.mark.parametrize(
    ("gpu", "job_gib", "replicas", "expected"),
    [
        ("L40S", 12, None, 4),  # 48 GiB / 12 GiB
        ("L40S", 20, None, 2),  # 48 / 20 = 2
        ("L40S", 40, None, 2),  # one fits, but sharing means at least 2
        ("L4", None, None, 4),  # no declared memory: the default
        ("L40S", 1, None, 16),  # capped
        ("L40S", 12, 7, 7),  # declared replicas win
    ],
)
def test_timeslice_replicas_are_sized_from_declared_memory(
    gpu: str, job_gib: int | None, replicas: int | None, expected: int
) -> None:
    slicing = {"mode": "timeslice", "replicas": replicas} if replicas else None
    decision = decide(facts(gpu, role="dev", jobMemoryGiB=job_gib, slicing=slicing))
    assert decision.replicas == expected


def test_mig_default_layout_is_all_balanced() -> None:
    decision = decide(facts(isolateTeams=True))
    assert decision.layout_name == "all-balanced"
    assert dict(decision.layout or ()) == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}


def test_every_row_explains_itself() -> None:
    reasons = [r.reason for r in TABLE]
    assert len(reasons) == len(set(reasons))
    assert all(r.reason[0].isupper() and " " not in r.reason and r.when and r.prefers in r.accepts for r in TABLE)
    assert TABLE[-1].test(facts()), "the last row must catch everything"


def test_one_slicing_enum_across_policy_trace_and_scan() -> None:
    """The plan's decision, ``trace synth``'s pool spec and ``scan``'s pools spell a pool's slicing
    with the same enum, whose values are the policy file's words."""
    from gpufleet.policy import load_policy, resolve
    from gpufleet.policy.slicing import SlicingMode
    from gpufleet.scan.fleet import NodePool
    from gpufleet.trace import Slicing
    from tests.support import EXAMPLES

    assert Slicing is SlicingMode
    assert [m.value for m in SlicingMode] == ["full", "mig", "timeslice"]
    fleet = resolve(load_policy(EXAMPLES / "fleet.yaml"))
    modes = {name: cap.decision.mode for name, cap in fleet.pools.items()}
    assert modes == {
        "h100-train": SlicingMode.FULL,
        "a100-mig": SlicingMode.MIG,
        "l40s-dev": SlicingMode.TIMESLICE,
        "h100-serve": SlicingMode.FULL,
    }
    assert all(type(m) is SlicingMode for m in modes.values())
    assert NodePool.__annotations__["sharing"] in ("SlicingMode", SlicingMode)
