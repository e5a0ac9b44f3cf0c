"""``gpufleet tune`` through the command line: the output folder, the policy file, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app, common
from gpufleet.outputs import MARKER
from gpufleet.policy import load_policy
from gpufleet.trace import write_trace
from tests.support import EXAMPLES
from tests.tune.cases import LIMITED, a_alone, b_comes_back, b_wants_the_pool

runner = CliRunner()


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    policy, trace = tmp_path / "policy.yaml", tmp_path / "trace.csv"
    policy.write_text(LIMITED)
    write_trace(a_alone(), trace)
    return policy, trace


def _tune(policy: Path, trace: Path, out: Path, *extra: str) -> object:
    args = ["tune", str(policy), "--trace", str(trace), "--jobs", "1", "-o", str(out), *extra]
    return runner.invoke(app, args)


def test_tune_writes_a_policy_plan_and_render_take(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy, trace = _inputs(tmp_path)
    out = tmp_path / "out"
    monkeypatch.setattr(common.console, "width", 100)  # a 100-column terminal
    result = _tune(policy, trace, out, "--trials", "4")
    assert result.exit_code == 0, result.output
    for name in ("recommended.yaml", "tune.json", "trials.csv", "study.journal", MARKER, "simulation/report.html"):
        assert (out / name).is_file(), name
    tuned = load_policy(out / "recommended.yaml")  # the round trip: a valid policy file
    a = tuned.team("a")
    assert a is not None and a.quota["train"].borrowingLimit != 0
    doc = json.loads((out / "tune.json").read_text())
    assert doc["simulated"] is True and set(doc["worlds"]) == {"first-apply", "input", "tuned"}
    assert any(
        d["setting"] == "teams[a].quota[train].borrowingLimit" and "IdleBehindLimits" in d["removes"]
        for d in doc["diff"]
    )
    rows = (out / "trials.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 and rows[1].startswith("0,input,True,3.999,3.002")
    assert "Three worlds" in result.output and "IdleBehindLimits" in result.output
    tables = [line for line in result.output.splitlines() if line[:1] in "┏┃┡│└"]
    wide = [line for line in tables if len(line) > 100]
    assert tables and wide == [], "tables fit 100 columns"
    plan = runner.invoke(app, ["plan", str(out / "recommended.yaml")])
    assert plan.exit_code == 0, plan.output
    rendered = runner.invoke(app, ["render", str(out / "recommended.yaml"), "-o", str(tmp_path / "manifests")])
    assert rendered.exit_code == 0, rendered.output


def test_rerunning_into_the_folder_resumes_the_study(tmp_path: Path) -> None:
    policy, trace = _inputs(tmp_path)
    out = tmp_path / "out"
    assert _tune(policy, trace, out, "--trials", "2").exit_code == 0
    first = (out / "trials.csv").read_text().splitlines()
    again = _tune(policy, trace, out, "--trials", "4", "--json")
    assert again.exit_code == 0, again.output
    rows = (out / "trials.csv").read_text().splitlines()
    assert rows[: len(first)] == first and len(rows) == 1 + 4
    assert json.loads(again.output)["study"]["trials"] == 4


def test_no_feasible_trial_is_a_finding_exit_1(tmp_path: Path) -> None:
    """One trial, the input, where b's four-card job waits out the window (Jain 0.5): the search ran and
    no trial met Jain 0.99, with no proof that none can (lifting a's limit would)."""
    policy, trace = _inputs(tmp_path)
    write_trace(b_wants_the_pool(), trace)
    out = tmp_path / "out"
    result = _tune(policy, trace, out, "--trials", "1", "--min-jain", "0.99", "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.output)
    assert doc["recommended"] is None and doc["pareto"] == [] and doc["diff"] == []
    (why,) = doc["infeasible"]  # not a bare "no trial met the constraints": which, and how close
    assert why["reason"] == "NoTrialFeasible" and why["constraint"] == "jain" and why["evidence"]
    assert load_policy(out / "recommended.yaml") == load_policy(policy)  # the input stays


def test_bad_inputs_exit_2_without_a_traceback(tmp_path: Path) -> None:
    policy, trace = _inputs(tmp_path)
    missing = _tune(policy, tmp_path / "nope.csv", tmp_path / "out")
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    refused = _tune(policy, trace, foreign)
    assert refused.exit_code == 2 and (foreign / "notes.txt").read_text() == "mine"
    bad_storage = _tune(policy, trace, tmp_path / "out2", "--storage", "postgresql://nobody@127.0.0.1:1/none")
    assert bad_storage.exit_code == 2, bad_storage.output
    assert not (tmp_path / "out2").exists()


def test_a_trace_a_federation_cannot_dispatch_is_refused_located(tmp_path: Path) -> None:
    """A federated policy is tuned through the federation (tests/tune/test_federated.py); a trace whose
    jobs carry no data class of its residency zones cannot be dispatched: exit 2, nothing written."""
    _, trace = _inputs(tmp_path)
    federated = _tune(EXAMPLES / "federation.yaml", trace, tmp_path / "out")
    assert federated.exit_code == 2 and "Traceback" not in federated.output
    assert "data_class" in federated.output and "residency zone" in federated.output
    assert not (tmp_path / "out").exists()


def test_held_out_weeks_are_judged_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One given week (b comes back) and one bootstrap week; the table fits 100 columns."""
    policy, trace = _inputs(tmp_path)
    week = tmp_path / "next.csv"
    write_trace(b_comes_back(), week)
    monkeypatch.setattr(common.console, "width", 100)
    out = tmp_path / "out"
    args = ("--trials", "4", "--min-jain", "0", "--holdout", "1", "--holdout-trace", str(week))
    result = _tune(policy, trace, out, *args)
    assert result.exit_code == 0, result.output
    assert "Held-out weeks" in result.output
    doc = json.loads((out / "tune.json").read_text())
    held = doc["heldOut"]
    assert held["weeks"] == ["next.csv", "bootstrap-1"]
    assert [(r["week"], r["world"]) for r in held["table"]] == [
        (w, world) for w in held["weeks"] for world in ("first-apply", "input", "tuned")
    ]
    assert held["judged"][-1]["meetsConstraints"] is True
    assert held["judged"][-1]["trial"] == doc["recommended"]["trial"]
    tuned_rows = [r for r in held["table"] if r["world"] == "tuned"]
    beaten = sum(r["beatsFirstApply"] for r in tuned_rows)
    assert held["judged"][-1]["beatsFirstApplyWeeks"] == beaten
    short = [i for i in doc["infeasible"] if i["reason"] == "FirstApplyNotBeaten"]
    assert len(short) == (0 if beaten == len(held["weeks"]) else 1)
    tables = [line for line in result.output.splitlines() if line[:1] in "┏┃┡│└"]
    assert [line for line in tables if len(line) > 100] == []
    bad = _tune(policy, trace, tmp_path / "out2", "--holdout-trace", str(tmp_path / "missing.csv"))
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_rung_hours_stops_trials_that_break_a_constraint_early(tmp_path: Path) -> None:
    """``--rung-hours``: trials run in rungs; with no preemption allowed, one whose b reclaims stops at
    a rung (its stop is recorded in the study), and the answer is the whole runs' (a keeps to its cards)."""
    import optuna

    policy, trace = _inputs(tmp_path)
    write_trace(b_comes_back(), trace)
    out = tmp_path / "out"
    args = ("--trials", "8", "--max-preemptions", "0", "--keep-guarantees", "--min-jain", "0", "--rung-hours", "1")
    result = _tune(policy, trace, out, *args)
    assert result.exit_code == 0, result.output
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(out / "study.journal")))
    trials = optuna.load_study(study_name="gpufleet-tune", storage=storage).trials
    stopped = [t.user_attrs["prunedAt"] for t in trials if "prunedAt" in t.user_attrs]
    assert stopped
    for s in stopped:  # a guarantee lent away is known before the run; a preemption shows at the 1 h rung
        assert s["at"] == (0 if s["why"][0].startswith("guarantees") else 3600), s
    doc = json.loads((out / "tune.json").read_text())
    # a keeps to its own two cards: 8 GPU-h but for the seconds a parked round waits to start
    assert doc["worlds"]["tuned"]["measures"]["goodputGpuHours"] == pytest.approx(8.0, abs=0.01)
    assert doc["study"]["stoppedEarly"] == len(stopped)
    assert f"{len(stopped)} stopped early" in " ".join(result.output.split())  # the user is told, not only the JSON
