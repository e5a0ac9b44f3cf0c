"""``trace synth POLICY``: the fleet policy itself drives the synthetic week (its teams, its pools)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.policy import load_policy
from gpufleet.trace import read_trace
from tests.support import EXAMPLES

runner = CliRunner()
POLICY = EXAMPLES / "fleet.yaml"


def test_the_policy_gives_the_teams_namespaces_classes_and_gpu_models(tmp_path: Path) -> None:
    out, again = tmp_path / "a.csv", tmp_path / "b.csv"
    for path in (out, again):
        result = runner.invoke(app, ["trace", "synth", str(POLICY), "--days", "1", "--seed", "3", "-o", str(path)])
        assert result.exit_code == 0, result.output
    jobs = read_trace(out)
    assert jobs and jobs == read_trace(again)
    policy = load_policy(POLICY)
    teams = {t.name: t for t in policy.teams}
    serving = policy.serving.pool if policy.serving else None
    queued_models = {p.gpu for p in policy.pools if p.name != serving}
    assert {j.team for j in jobs} == set(teams)
    for j in jobs:
        team = teams[j.team]
        assert j.namespace == team.namespaces[0]
        assert j.priority_class in team.priorityClasses and j.data_class in team.dataClasses
        assert set(j.gpu_models) <= queued_models  # never the serving pool's reservation
    # the lightest team floods the queue: the most jobs
    counts = {name: sum(1 for j in jobs if j.team == name) for name in teams}
    lightest = min(policy.teams, key=lambda t: (t.weight, policy.teams.index(t))).name
    assert max(counts, key=lambda n: counts[n]) == lightest


def test_a_broken_policy_is_reported_as_a_policy_with_its_lines(tmp_path: Path) -> None:
    broken = tmp_path / "fleet.yaml"
    broken.write_text(POLICY.read_text().replace("gpusPerNode: 8", "gpusPerNode: 80", 1))
    result = runner.invoke(app, ["trace", "synth", str(broken), "-o", str(tmp_path / "t.csv")])
    assert result.exit_code == 2
    assert "1 problem found" in result.output and "gpusPerNode" in result.output
    assert f"{broken}:" in result.output and not (tmp_path / "t.csv").exists()
