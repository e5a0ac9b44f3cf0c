"""``gpufleet trace``: synth, show and convert through the command line."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.trace import read_trace

runner = CliRunner()

SPEC = """
days: 2
load: 0.5
teams:
  - {name: research, weight: 2, priorityClasses: [batch], dataClasses: [internal], models: [m]}
  - {name: interns, flood: true}
pools:
  - {name: h100, gpu: H100, gpus: 8}
  - {name: mig, gpu: A100, gpus: 4, slicing: mig, migProfiles: [1g.10gb]}
"""


def test_synth_writes_a_reproducible_trace_and_show_summarizes_it(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    first, second = tmp_path / "a.csv", tmp_path / "b.parquet"
    for out in (first, second):
        result = runner.invoke(app, ["trace", "synth", str(spec), "--seed", "5", "--days", "1", "-o", str(out)])
        assert result.exit_code == 0, result.output
    jobs = read_trace(first)
    assert jobs == read_trace(second)
    assert jobs and max(j.submit_s for j in jobs) < 86_400
    shown = runner.invoke(app, ["trace", "show", str(first)])
    assert shown.exit_code == 0 and "research" in shown.output
    assert f"{len(jobs)} jobs" in shown.output and "peak demand" in shown.output


def test_convert_between_formats(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    source, target = tmp_path / "a.csv", tmp_path / "a.parquet"
    runner.invoke(app, ["trace", "synth", str(spec), "-o", str(source)])
    result = runner.invoke(app, ["trace", "convert", str(source), "-o", str(target)])
    assert result.exit_code == 0, result.output
    assert read_trace(target) == read_trace(source)


def test_user_mistakes_exit_2_with_located_problems(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("teams: [{name: x, weight: 0}]\npools: [{name: p, gpu: g, gpus: 1, slicing: mig}]\n")
    result = runner.invoke(app, ["trace", "synth", str(spec), "-o", str(tmp_path / "t.csv")])
    assert result.exit_code == 2
    said = " ".join(result.output.split())  # the console wraps long lines
    assert "2 problems found" in said
    assert "spec.yaml:1:27: teams[0].weight: Input should be greater than 0" in said  # file, line, column, field
    assert "spec.yaml:2:9: pools[0]: Value error, a mig pool needs migProfiles" in said
    missing = runner.invoke(app, ["trace", "show", str(tmp_path / "nope.csv")])
    assert missing.exit_code == 2 and "no such trace file" in " ".join(missing.output.split())
