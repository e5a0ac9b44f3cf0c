"""Answers are never cut off: at 80 and 100 columns every name and time in a table appears whole.

The names and times to look for come from each command's own ``--json`` answer, so the test checks
the table against the data, not against a copy of the table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.table import Table
from typer.testing import CliRunner

from gpufleet.cli import app, common
from gpufleet.durations import human
from gpufleet.trace import write_trace
from tests.simulate.fleets import SERVING_AT_RISK, job
from tests.support import EXAMPLES

runner = CliRunner()
SCENARIO = Path(__file__).parent / "twin" / "scenarios" / "schedule_preempt_in_cq_and_cohort.yaml"
LONG = "preemptor-finetune-llama-3-70b-instruct-long-context-000001"


@pytest.fixture(params=[80, 100], ids=lambda w: f"{w}-columns")
def width(request: pytest.FixtureRequest) -> Iterator[int]:
    """The shared console as a terminal of that width would have it."""
    before = common.console.width
    common.console.width = request.param
    try:
        yield request.param
    finally:
        common.console.width = before


def _table_text(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    assert "…" not in result.output, "rich cropped a cell"
    for line in result.output.splitlines():
        if line[:1] in _BOX:  # a table's line: it ends in its right border unless the table was cropped
            assert line.rstrip()[-1:] in _BOX, f"a table's right edge was cut off: {line!r}"
    return result.output


_BOX = set("┏┃┡│├└┓┩┤┘━─╇┼┴┳╋┯┷")


def test_plan_tables_keep_pool_names_and_units_whole(width: int) -> None:
    del width
    plan = json.loads(runner.invoke(app, ["plan", str(EXAMPLES / "fleet.yaml"), "--json"]).stdout)
    text = _table_text(["plan", str(EXAMPLES / "fleet.yaml")])
    for pool in plan["pools"]:
        assert pool["name"] in text
        assert pool["reason"] in text
        for resource in pool["units"]:
            assert resource.removeprefix("nvidia.com/") in text  # a cell may wrap between "16×" and the unit


def test_twin_tables_keep_workload_names_whole(width: int, tmp_path: Path) -> None:
    del width
    docs = SCENARIO.read_text(encoding="utf-8").split("\n---\n")
    objects = "\n---\n".join(d for d in docs if "kind: TwinScenario" not in d).replace(
        "  name: preemptor\n", f"  name: {LONG}\n"
    )
    path = tmp_path / "objects.yaml"
    path.write_text(objects, encoding="utf-8")
    report = json.loads(runner.invoke(app, ["twin", "step", str(path), "--cycles", "2", "--json"]).stdout)
    text = _table_text(["twin", "step", str(path), "--cycles", "2"])
    names = {w["workload"] for c in report["cycles"] for k in ("admitted", "preempted", "pending") for w in c[k]}
    assert f"eng-beta/{LONG}" in names
    for name in names:
        assert name in text, name
    for queue in report["clusterQueues"]:
        assert queue in text


def test_simulate_tables_keep_waits_whole(width: int, tmp_path: Path) -> None:
    policy, trace = tmp_path / "fleet.yaml", tmp_path / "trace.csv"
    policy.write_text(SERVING_AT_RISK)
    write_trace([job(f"t{i}", "a", i * 60, 4 * 3600, gpus=2) for i in range(6)], trace)
    base = ["simulate", str(policy), "--trace", str(trace), "--compare", "first-apply"]
    document = json.loads(runner.invoke(app, [*base, "-o", str(tmp_path / "j"), "--json"]).stdout)
    text = _table_text([*base, "-o", str(tmp_path / "t")])
    waits = {
        human(w) for run in document["runs"].values() for t in run["teams"].values() for w in t["waitSeconds"].values()
    }
    assert any(re.search(r"\d+ h", w) for w in waits), waits  # a wait with two units, the kind that could wrap
    for wait in waits:
        assert re.search(rf"(?<![\d.]){re.escape(wait)}(?![\d])", text), wait
    if width >= 100:  # the terminal: side by side, the per-team table would need 150 columns
        assert "per team and job kind: first-apply" in text and "per team and job kind: queue" in text
        assert max(len(line) for line in text.splitlines() if line[:1] in _BOX) <= width  # paths may run on


@pytest.mark.parametrize("cells", [["a" * 70, "b" * 70], ["short", "x" * 30 + " " + "y" * 30]])
def test_print_table_runs_long_rather_than_cropping(width: int, cells: list[str]) -> None:
    table = Table()
    for i, _ in enumerate(cells):
        table.add_column(f"c{i}")
    table.add_row(*cells)
    with common.console.capture() as captured:
        common.print_table(table)
    text = captured.get()
    for word in " ".join(cells).split():
        assert word in text
    assert common.console.width == width, "the console's width is restored"
