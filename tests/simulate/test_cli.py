"""`gpufleet simulate` and `gpufleet demo` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from gpufleet.cli import app, common
from gpufleet.demo import run_demo
from gpufleet.durations import human
from gpufleet.ledger.store import Ledger
from gpufleet.trace import write_trace
from tests.simulate.fleets import SERVING_AT_RISK, job

runner = CliRunner()


def test_simulate_compares_both_worlds(tmp_path: Path) -> None:
    policy = tmp_path / "fleet.yaml"
    policy.write_text(SERVING_AT_RISK)
    trace = tmp_path / "trace.csv"
    write_trace([job("t1", "a", 0, 7200, gpus=2), job("t2", "a", 60, 7200, gpus=2)], trace)
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["simulate", str(policy), "--trace", str(trace), "--compare", "first-apply", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "Before and after, per team and job kind" in result.output
    document = json.loads((out / "results.json").read_text())
    assert list(document["runs"]) == ["first-apply", "queue"]
    assert (out / "report.html").exists()


def test_simulate_rejects_an_unknown_baseline(tmp_path: Path) -> None:
    policy = tmp_path / "fleet.yaml"
    policy.write_text(SERVING_AT_RISK)
    trace = tmp_path / "trace.csv"
    write_trace([job("t1", "a", 0, 60)], trace)
    result = runner.invoke(app, ["simulate", str(policy), "--trace", str(trace), "--compare", "yesterday"])
    assert result.exit_code == 2
    assert "--compare takes 'first-apply'" in result.output


def test_demo_writes_every_stage(tmp_path: Path) -> None:
    """One synthetic day instead of the week keeps the test short; the chain is the same."""
    result = run_demo(tmp_path, days=1)
    assert [r.name for r in result.results] == ["first-apply", "queue"]
    assert result.written.report.html.exists()
    assert (tmp_path / "manifests" / "kustomization.yaml").exists()
    with Ledger.open(str(result.ledger)) as ledger:
        records = list(ledger.current_records())
    assert records and all(r.simulated for r in records)
    assert len(records) == result.ledger_records


def test_simulate_leads_with_the_measures_within_100_columns(tmp_path: Path) -> None:
    """The measures and per-team tables come first, fit 100 columns, and show each world's waits
    from results.json whole; the findings follow (here: none)."""
    policy, trace = tmp_path / "fleet.yaml", tmp_path / "trace.csv"
    policy.write_text(SERVING_AT_RISK)
    write_trace([job(f"t{i}", "a", i * 60, 4 * 3600, gpus=2) for i in range(6)], trace)
    before = common.console.width
    common.console.width = 100
    try:
        base = ["simulate", str(policy), "--trace", str(trace), "--compare", "first-apply"]
        result = runner.invoke(app, [*base, "-o", str(tmp_path / "out")])
    finally:
        common.console.width = before
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.index("Measures over one window") < text.index("Findings") < text.index("Before and after")
    answer = text[: text.index("Before and after")]
    assert max(len(line) for line in answer.splitlines()) <= 100
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    for m in document["measures"].values():
        w = m["teams"]["a"]["waitSeconds"]
        assert f"{human(w['p50'])} / {human(w['p95'])}" in answer
        assert f"{m['goodputGpuHours']:,.1f}" in answer


def test_three_worlds_of_measures_fit_100_columns(tmp_path: Path) -> None:
    """``tune``'s three worlds (first apply, the input policy, the tuned one) print side by side
    within 100 columns, with the longest waits whole."""
    from gpufleet.cli.answer import print_measures

    policy, trace = tmp_path / "fleet.yaml", tmp_path / "trace.csv"
    policy.write_text(SERVING_AT_RISK)
    write_trace([job(f"t{i}", "a", i * 60, 30 * 3600 + 37 * 60, gpus=2) for i in range(6)], trace)
    out = tmp_path / "out"
    base = ["simulate", str(policy), "--trace", str(trace), "--compare", "first-apply", "-o", str(out), "--json"]
    assert runner.invoke(app, base).exit_code == 0
    document = json.loads((out / "results.json").read_text())
    document["measures"]["tuned"] = document["measures"]["queue"]
    before = common.console.width
    common.console.width = 100
    try:
        with common.console.capture() as captured:
            print_measures(document)
    finally:
        common.console.width = before
    text = captured.get()
    assert max(len(line) for line in text.splitlines()) <= 100
    for m in document["measures"].values():
        c = m["teams"]["a"]["completionSeconds"]
        assert f"{human(c['p50'])} / {human(c['p95'])}" in text
