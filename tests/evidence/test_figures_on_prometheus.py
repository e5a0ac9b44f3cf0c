"""The evidence report on a real Prometheus loaded with the scenario in evidence_scenario.py, cell by cell.

Every expected number below is worked out by hand from the generated series: 240 scrapes of 30 s per
window (2 h), a MIG instance weighs compute slices / 7, a time-sliced replica 1/4 of the card.
A string is the reason a cell must read "not measured".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evidence_scenario import LivePrometheus
from typer.testing import CliRunner

from gpufleet.cli import app

HOURS = 2.0  # each window
SLOT_H = 30 / 3600
runner = CliRunner()
pytestmark = pytest.mark.xdist_group("prometheus")  # one server per worker is enough

# (window, pool, team, figure) -> value, or the reason it is not measured
EXPECTED: list[tuple[str, str, str | None, str, float | str]] = [
    # --- before: train (2 full H100s on node-a)
    ("before", "train", None, "capacity", 2 * HOURS),
    ("before", "train", None, "allocated", 1 * HOURS),  # train-1; old-job has Succeeded and must not count
    ("before", "train", None, "busy", 0.5 * HOURS + 0.0 * HOURS),
    ("before", "train", None, "utilization", 1.0 / 4.0 * 100),
    ("before", "train", None, "idle_while_allocated", (1 - 0.5) * HOURS),  # gpu1 was held by nobody
    ("before", "train", None, "idle_while_work_waited", "NoLedger"),
    ("before", "train", None, "memory_headroom", (20480 + 81920) / (81920 + 81920) * 100),
    ("before", "train", "research", "allocated", 1 * HOURS),
    ("before", "train", "research", "busy", 0.5 * HOURS),
    ("before", "train", "research", "utilization", 0.5 * HOURS / (1 * HOURS) * 100),
    ("before", "train", "research", "idle_while_allocated", 0.5 * HOURS),
    ("before", "train", "research", "memory_headroom", 20480 / 81920 * 100),
    ("before", "train", "nlp", "allocated", "NoSeries"),
    ("before", "train", "nlp", "busy", "NoSeries"),
    ("before", "train", "nlp", "memory_headroom", "NoSeries"),
    ("before", "train", "vision", "allocated", "NoSeries"),
    ("before", "train", "vision", "busy", "NoSeries"),
    # --- before: mig (A100 all-balanced on node-b); the 3g.40gb instance misses 60 of 240 scrapes:
    # coverage = (3/7·180 + 2/7·240 + 1/7·240 + 1/7·240) / 240 = 0.893 < 0.9
    ("before", "mig", None, "capacity", 1 * HOURS),
    ("before", "mig", None, "allocated", (3 + 2) / 7 * HOURS),
    ("before", "mig", None, "busy", "Gaps"),
    ("before", "mig", None, "utilization", "Gaps"),
    ("before", "mig", None, "idle_while_allocated", "Gaps"),
    ("before", "mig", None, "memory_headroom", "NoSeries"),
    ("before", "mig", "research", "allocated", 3 / 7 * HOURS),
    ("before", "mig", "research", "busy", "Gaps"),
    ("before", "mig", "nlp", "allocated", 2 / 7 * HOURS),
    ("before", "mig", "nlp", "busy", "Gaps"),
    ("before", "mig", "vision", "allocated", "NoSeries"),
    ("before", "mig", "vision", "busy", "NoSeries"),
    # --- before: dev (one L40S time-sliced ×4 on node-c)
    ("before", "dev", None, "capacity", 1 * HOURS),
    ("before", "dev", None, "allocated", 1 / 4 * HOURS),
    ("before", "dev", None, "busy", 0.25 * HOURS),
    ("before", "dev", None, "utilization", 25.0),
    ("before", "dev", None, "idle_while_allocated", 0.75 * HOURS),
    ("before", "dev", None, "memory_headroom", "NoSeries"),
    ("before", "dev", "research", "allocated", 1 / 4 * HOURS),
    ("before", "dev", "research", "busy", "TimeSlicedNoAttribution"),
    ("before", "dev", "research", "idle_while_allocated", "TimeSlicedNoAttribution"),
    ("before", "dev", "nlp", "allocated", "NoSeries"),
    ("before", "dev", "nlp", "busy", "TimeSlicedNoAttribution"),
    # --- after: train; gpu1 has no engine series, so DCGM_FI_DEV_GPU_UTIL 60 % stands in
    ("after", "train", None, "capacity", 2 * HOURS),
    ("after", "train", None, "allocated", 2 * HOURS),
    ("after", "train", None, "busy", 0.8 * HOURS + 0.6 * HOURS),
    ("after", "train", None, "utilization", (0.8 + 0.6) / 2 * 100),
    ("after", "train", None, "idle_while_allocated", 0.2 * HOURS + 0.4 * HOURS),
    ("after", "train", None, "memory_headroom", (20480 + 40960) / (81920 + 81920) * 100),
    ("after", "train", "research", "allocated", 1 * HOURS),
    ("after", "train", "research", "busy", 0.8 * HOURS),
    ("after", "train", "research", "utilization", 80.0),
    ("after", "train", "research", "idle_while_allocated", 0.2 * HOURS),
    ("after", "train", "research", "memory_headroom", 25.0),
    ("after", "train", "nlp", "allocated", 1 * HOURS),
    ("after", "train", "nlp", "busy", 0.6 * HOURS),
    ("after", "train", "nlp", "utilization", 60.0),
    ("after", "train", "nlp", "idle_while_allocated", 0.4 * HOURS),
    ("after", "train", "nlp", "memory_headroom", 50.0),
    ("after", "train", "vision", "busy", "NoSeries"),
    # --- after: mig series carry no namespace label; one 1g instance misses 24 scrapes (coverage 0.986)
    ("after", "mig", None, "capacity", 1 * HOURS),
    ("after", "mig", None, "allocated", (3 + 2) / 7 * HOURS),
    ("after", "mig", None, "busy", (3 * 0.5 * HOURS + 2 * 0.5 * HOURS + 1 * 0.0 * HOURS + 1 * 1.0 * 216 * SLOT_H) / 7),
    ("after", "mig", None, "utilization", (3 * 0.5 * HOURS + 2 * 0.5 * HOURS + 216 * SLOT_H) / 7 / HOURS * 100),
    ("after", "mig", None, "idle_while_allocated", "MissingLabels"),
    ("after", "mig", None, "memory_headroom", "NoSeries"),
    ("after", "mig", "research", "allocated", 3 / 7 * HOURS),
    ("after", "mig", "research", "busy", "MissingLabels"),
    ("after", "mig", "nlp", "allocated", 2 / 7 * HOURS),
    ("after", "mig", "nlp", "utilization", "MissingLabels"),
    ("after", "mig", "vision", "allocated", "NoSeries"),
    # --- after: dev; kube_node_info for node-c misses 48 of 240 scrapes (0.8 < 0.9)
    ("after", "dev", None, "allocated", "Gaps"),
    ("after", "dev", None, "busy", 0.75 * HOURS),
    ("after", "dev", None, "utilization", 75.0),
    ("after", "dev", None, "idle_while_allocated", 0.25 * HOURS),
    ("after", "dev", "research", "allocated", "Gaps"),
    ("after", "dev", "nlp", "allocated", "Gaps"),  # nb-3 runs in nlp-eval, the team's second namespace
    ("after", "dev", "vision", "allocated", "NoSeries"),
    ("after", "dev", "research", "busy", "TimeSlicedNoAttribution"),
]


def _run(prom: LivePrometheus, out: Path, *extra: str) -> Any:
    policy = Path(__file__).with_name("fleet.yaml")
    args = ["evidence", "--prometheus", prom.url, "--before", prom.windows.before, "--after", prom.windows.after]
    result = runner.invoke(app, [*args, "--policy", str(policy), "-o", str(out), *extra])
    assert result.exit_code == 0, result.output
    return json.loads((out / "evidence.json").read_text()), result.output


@pytest.fixture(scope="module")
def report(prometheus: LivePrometheus, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str, Path]:
    out = tmp_path_factory.mktemp("evidence") / "out"
    data, output = _run(prometheus, out)
    return data, output, out


def _cell(data: Any, window: str, pool: str, team: str | None, figure: str) -> dict[str, Any]:
    rows = data["windows"][window]["rows"]
    row = next(r for r in rows if r["pool"] == pool and r["team"] == team)
    return row["figures"][figure]


@pytest.mark.parametrize(
    ("window", "pool", "team", "figure", "expected"),
    EXPECTED,
    ids=[f"{w}-{p}-{t or 'pool'}-{f}" for w, p, t, f, _ in EXPECTED],
)
def test_each_cell_matches_the_hand_worked_figure(
    report: tuple[Any, str, Path], window: str, pool: str, team: str | None, figure: str, expected: float | str
) -> None:
    cell = _cell(report[0], window, pool, team, figure)
    if isinstance(expected, str):
        assert cell["value"] is None, cell
        assert cell["reason"] == expected, cell
        assert cell["message"]
    else:
        assert cell["value"] == pytest.approx(expected, abs=1e-9), cell


def test_every_cell_is_either_a_number_or_not_measured_with_a_reason(report: tuple[Any, str, Path]) -> None:
    for window in report[0]["windows"].values():
        for row in window["rows"]:
            for cell in row["figures"].values():
                assert (cell["value"] is None) == ("reason" in cell), cell


@pytest.mark.parametrize(
    ("window", "pool", "figure", "coverage"),
    [
        ("before", "mig", "busy", (3 * 180 + 2 * 240 + 240 + 240) / 7 / 240),
        ("after", "mig", "busy", 1 - 24 / (7 * 240)),
        ("after", "dev", "allocated", 192 / 240),
        ("after", "train", "busy", 1.0),
    ],
    ids=["gapped-mig", "nearly-full-mig", "ksm-heartbeat-gap", "full"],
)
def test_coverage_is_the_share_of_device_time_sampled(
    report: tuple[Any, str, Path], window: str, pool: str, figure: str, coverage: float
) -> None:
    assert _cell(report[0], window, pool, None, figure)["coverage"] == pytest.approx(coverage)


def test_partial_coverage_bounds_the_figure_by_an_idle_or_busy_gap(report: tuple[Any, str, Path]) -> None:
    busy = _cell(report[0], "after", "mig", None, "busy")
    missing = 1 / 7 * 24 * SLOT_H  # the 1g.10gb instance's 24 unsampled scrapes, as card-hours
    assert busy["low"] == pytest.approx(busy["value"])
    assert busy["high"] == pytest.approx(busy["value"] + missing)
    util = _cell(report[0], "after", "mig", None, "utilization")
    assert util["high"] == pytest.approx(50.0)  # (6.8/7 + 0.2/7) / 2 h


def test_the_changes_state_direction_and_range(report: tuple[Any, str, Path]) -> None:
    changes = {(c["pool"], c["team"]): c for c in report[0]["changes"]}
    train = changes[("train", None)]
    assert (train["delta"], train["low"], train["high"], train["verdict"]) == pytest.approx((45.0, 45.0, 45.0, "up"))
    assert changes[("train", "research")]["delta"] == pytest.approx(0.8 - 0.5)  # average busy GPUs
    assert changes[("dev", None)]["delta"] == pytest.approx(50.0)
    assert changes[("mig", None)]["verdict"] == "not measured"
    assert "Gaps" in changes[("mig", None)]["statement"]
    assert changes[("train", "nlp")]["verdict"] == "not measured"


def test_a_host_in_no_pool_is_left_out_and_said_so(report: tuple[Any, str, Path]) -> None:
    assert any("node-x" in note for note in report[0]["windows"]["after"]["notes"])


def test_the_terminal_table_shows_numbers_and_not_measured(report: tuple[Any, str, Path]) -> None:
    output = report[1]
    assert "70.00" in output  # after, train utilization
    assert "not measured" in output
    assert "TimeSlicedNoAttribution" in output


def test_the_page_is_self_contained_and_the_charts_are_png(report: tuple[Any, str, Path]) -> None:
    out = report[2]
    html = (out / "evidence.html").read_text()
    assert "data:image/png;base64," in html
    assert "<script" not in html and 'src="http' not in html and 'href="http' not in html
    assert "not measured" in html and "MissingLabels" in html
    for name in ("utilization-before.png", "utilization-after.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_coverage_threshold_is_an_option_and_the_rule_still_holds(
    prometheus: LivePrometheus, tmp_path: Path
) -> None:
    data, _ = _run(prometheus, tmp_path / "out", "--min-coverage", "0.85")
    busy = _cell(data, "before", "mig", None, "busy")
    measured = (3 * 0.5 * 180 * SLOT_H + 2 * 1.0 * HOURS) / 7  # only the sampled scrapes count
    assert busy["value"] == pytest.approx(measured)
    assert busy["high"] == pytest.approx(measured + 3 / 7 * 60 * SLOT_H)
    assert _cell(data, "after", "dev", None, "allocated")["reason"] == "Gaps"  # 0.8 is still below 0.85


def test_only_the_named_pools_are_reported(prometheus: LivePrometheus, tmp_path: Path) -> None:
    data, _ = _run(prometheus, tmp_path / "out", "--pool", "train")
    assert {r["pool"] for r in data["windows"]["before"]["rows"]} == {"train"}
