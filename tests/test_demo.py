"""``gpufleet demo``: the tuned queue against first apply on the example's simulated week."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.demo import run_demo
from gpufleet.outputs import MARKER
from gpufleet.policy import load_policy
from gpufleet.tune.verdict import headline, shortfalls

runner = CliRunner()


def test_a_short_demo_tunes_and_says_what_changes(tmp_path: Path) -> None:
    """One synthetic day: the chain is the same, the figures are the run's own."""
    out = tmp_path / "demo"
    result = runner.invoke(app, ["demo", "-o", str(out), "--json", "--days", "1"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    tuned = load_policy(out / "tune" / "recommended.yaml")
    assert tuned.pools == load_policy(out / "fleet.yaml").pools
    assert json.loads((out / "tune" / MARKER).read_text())["command"] == "tune"
    worlds = doc["tune"]["worlds"]
    assert list(worlds) == ["first-apply", "input", "tuned"]
    first, tuned_m = worlds["first-apply"]["measures"], worlds["tuned"]["measures"]
    # every number in the sentence is one the simulation produced
    sentence = doc["headline"]
    assert sentence.startswith("Simulated:")
    assert f"{round(tuned_m['goodputGpuHours']):,} GPU-h against {round(first['goodputGpuHours']):,}" in sentence
    assert f"at most {tuned_m['preemptionsPerJob']['max']} preemptions" in sentence
    assert re.search(r"\(([+-]\d+) %\)", sentence)


@pytest.mark.slow
def test_the_tuned_queue_against_first_apply_on_the_example_week(tmp_path: Path) -> None:
    """The demo's week, with kube-scheduler's stock scoring as the real one computes it: the tuned
    queue finishes every job first apply finishes, keeps the serving pool whole where first apply
    starves it, shortens the worst team's p95 wait (and every team's against the given policy), stays fair (Jain at least 0.95) and preempts no job
    more than 3 times. Goodput against first apply is whatever the run gives, and the headline says
    which way it went: first apply also runs batch work on the serving cards, so it can finish more
    GPU-hours inside the week (docs/simulate.md, "Checked against the real control plane")."""
    result = run_demo(tmp_path / "demo")
    first, given, tuned = (w.measures for w in result.tuning.worlds)
    assert tuned.finished == first.finished == tuned.jobs and tuned.never_admissible == 0
    assert first.serving_starved_replica_min > 0 and tuned.serving_starved_replica_min == 0
    # the worst team's p95 wait is shorter than first apply's; with the control plane's finish delay
    # (docs/simulate.md, "World differential") nlp's is not (13 h 15 min against 13 h 9 min), so the
    # claim that every team's is shorter no longer stands; against the given policy every team's is
    worst = max(t.wait_p95_s or 0 for t in tuned.teams)
    assert worst < max(t.wait_p95_s or 0 for t in first.teams)
    before = {t.team: t.wait_p95_s for t in given.teams}
    assert all(t.wait_p95_s is not None and t.wait_p95_s < (before[t.team] or 0) for t in tuned.teams)
    assert tuned.preemptions_max <= 3 and tuned.jain is not None and tuned.jain >= 0.95
    assert tuned.goodput_gpu_h > given.goodput_gpu_h
    assert given.preemptions_max > 3, "the example policy thrashes (that is what the demo shows)"
    missing = shortfalls(first, tuned, result.tuning.constraints)
    behind = tuned.goodput_gpu_h <= first.goodput_gpu_h
    waits = {t.team: t.wait_p95_s or 0 for t in first.teams}
    longer = [t.team for t in tuned.teams if (t.wait_p95_s or 0) > waits[t.team]]
    # the verdict names every goal missed: goodput behind first apply, and each team waiting longer
    assert len(missing) == behind + len(longer)
    assert behind == (
        f"goodput {tuned.goodput_gpu_h:,.0f} GPU-h is not above first apply's {first.goodput_gpu_h:,.0f}" in missing
    )
    assert all(any(m.startswith(f"{team}'s p95 wait") for m in missing) for team in longer)
    if behind:
        assert "It misses the goal: goodput" in headline(first, given, tuned, result.tuning.constraints)
