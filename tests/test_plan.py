"""The plan: units per pool, quotas against capacity, how far each team can reach, and the warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.plan import make_plan
from gpufleet.policy import load_policy, parse_policy, resolve
from gpufleet.trace import write_trace
from gpufleet.trace.job import Job
from tests.simulate.fleets import TWO_TEAMS, job
from tests.support import EXAMPLES

PLAN = make_plan(resolve(load_policy(EXAMPLES / "fleet.yaml")))


def test_units_per_pool() -> None:
    units = {p.name: p.units for p in PLAN.pools}
    assert units == {
        "h100-train": {"nvidia.com/gpu": 16},
        # 8 A100-80GB cards in all-balanced: 2×1g + 1×2g + 1×3g each
        "a100-mig": {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8},
        "l40s-dev": {"nvidia.com/gpu.shared": 16},  # 4 cards × 4 replicas (48 GiB / 12 GiB)
        "h100-serve": {"nvidia.com/gpu": 8},
    }


@pytest.mark.parametrize(
    ("team", "nominal", "reach"),
    [
        # research: 8 + borrowing limit 8, and others can lend 6 (nlp) + 2 (vision) = 8 → 16
        ("research", 8, 16),
        # nlp: 6 + min(borrowingLimit 6, research lends only 4 + vision 2 = 6) → 12
        ("nlp", 6, 12),
        # vision: 2 + min(4, research 4 + nlp 6 = 10) → 6
        ("vision", 2, 6),
    ],
)
def test_reach_on_the_training_pool(team: str, nominal: int, reach: int) -> None:
    quota = next(q for q in PLAN.quotas if q.pool == "h100-train")
    row = next(t for t in quota.teams if t.team == team)
    assert (row.nominal, row.reach) == (nominal, reach)
    assert quota.unassigned == 0


def test_serving_reservation() -> None:
    assert PLAN.serving is not None
    assert PLAN.serving.reserved == {"nvidia.com/gpu": 6}  # chat 1×4 + chat-small 2×1
    assert PLAN.serving.capacity == {"nvidia.com/gpu": 8}


def test_warnings_name_their_reason() -> None:
    aks = make_plan(resolve(load_policy(EXAMPLES / "aks.yaml")))
    reasons = [w.reason for w in aks.warnings]
    assert reasons.count("NodesNotNamed") == 3
    assert "az aks nodepool" in aks.warnings[0].message
    flagged = (
        (EXAMPLES / "tiny.yaml")
        .read_text()
        .replace(
            "role: training, workloads: [training, dev]}",
            "role: training, workloads: [training, dev], slicing: {mode: timeslice}}",
        )
    )
    tiny = make_plan(resolve(parse_policy(flagged)))
    (warning,) = [w for w in tiny.warnings if w.reason == "ContradictsTable"]
    assert "declared timeslice but the table says full (TrainingNeedsFullCards)" in warning.message


def test_plan_json_is_the_plan() -> None:
    result = CliRunner().invoke(app, ["plan", str(EXAMPLES / "fleet.yaml"), "--json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert [p["mode"] for p in data["pools"]] == ["full", "mig", "timeslice", "full"]
    assert data["table"][0]["reason"] == "ServingLatencyGoal"


def test_plan_human_output_explains_each_pool() -> None:
    result = CliRunner().invoke(app, ["plan", str(EXAMPLES / "fleet.yaml")])
    assert result.exit_code == 0
    assert "IsolationNeedsMIG" in result.output
    assert "48 GiB card / 12 GiB per job = 4 replicas per card" in result.output


def test_init_writes_a_policy_that_plans(tmp_path: Path) -> None:
    target = tmp_path / "fleet.yaml"
    assert CliRunner().invoke(app, ["init", str(target)]).exit_code == 0
    assert CliRunner().invoke(app, ["plan", str(target)]).exit_code == 0
    again = CliRunner().invoke(app, ["init", str(target)])
    assert again.exit_code == 2 and "already exists" in again.output


def test_schema_is_json_schema_of_the_policy() -> None:
    result = CliRunner().invoke(app, ["schema"])
    schema = json.loads(result.stdout)
    assert schema["title"] == "FleetPolicy"
    assert {"pools", "teams", "serving"} <= set(schema["properties"])


def _trace_case(tmp_path: Path, jobs: list[Job]) -> list[str]:
    policy, trace = tmp_path / "fleet.yaml", tmp_path / "trace.csv"
    policy.write_text(TWO_TEAMS)
    write_trace(jobs, trace)
    return ["plan", str(policy), "--trace", str(trace)]


def test_plan_with_a_trace_names_the_pathologies_and_exits_1(tmp_path: Path) -> None:
    """TWO_TEAMS: a reaches 2 cards, so a 3-GPU job is never admissible; the 2-GPU job runs."""
    args = _trace_case(tmp_path, [job("big", "a", 0, 3600, gpus=3), job("ok", "a", 0, 600, gpus=2)])
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["pools"][0]["name"] == "train"  # the plan is still there
    sim = document["simulation"]
    assert [f["reason"] for f in sim["findings"]["queue"]] == ["NeverAdmissible"]
    assert sim["measures"]["queue"]["neverAdmissible"] == 1
    assert sim["measures"]["queue"]["goodputGpuHours"] == pytest.approx(2 * 600 / 3600, abs=1e-3)
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 1
    assert "NeverAdmissible" in text.output and "a can reach at most 2 on train" in text.output


def test_plan_with_a_calm_trace_exits_0(tmp_path: Path) -> None:
    args = _trace_case(tmp_path, [job("j", "a", 0, 600), job("k", "b", 0, 600)])
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["simulation"]["findings"] == {"queue": []}


def test_plan_with_a_missing_trace_is_unusable_input(tmp_path: Path) -> None:
    policy = tmp_path / "fleet.yaml"
    policy.write_text(TWO_TEAMS)
    result = CliRunner().invoke(app, ["plan", str(policy), "--trace", str(tmp_path / "nope.csv")])
    assert result.exit_code == 2
    assert "nope.csv" in result.output and "Traceback" not in result.output
