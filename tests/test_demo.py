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
from gpufleet.tune.verdict import shortfalls

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
def test_the_tuned_queue_beats_first_apply_on_the_example_week(tmp_path: Path) -> None:
    """The issue's goal, on the demo's own week: more goodput than first apply, every team's p95
    wait shorter, no serving starvation, Jain at least 0.95, no job preempted more than 3 times."""
    result = run_demo(tmp_path / "demo")
    first, given, tuned = (w.measures for w in result.tuning.worlds)
    assert shortfalls(first, tuned, result.tuning.constraints) == []
    assert tuned.goodput_gpu_h > first.goodput_gpu_h
    waits = {t.team: t.wait_p95_s for t in first.teams}
    assert all(t.wait_p95_s is not None and t.wait_p95_s < (waits[t.team] or 0) for t in tuned.teams)
    assert tuned.serving_starved_replica_min == 0 and tuned.preemptions_max <= 3
    assert tuned.jain is not None and tuned.jain >= 0.95
    assert given.preemptions_max > 3, "the example policy thrashes (that is what the demo shows)"
