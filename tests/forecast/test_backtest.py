"""``gpufleet backtest``: the forecast judged at moments of a trace's simulated run, as the calibration
bench judges the example's week, on any trace and policy; and every user mistake answered with exit 2
and a located message."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.forecast.backtest import moments_of
from gpufleet.forecast.calibration import checks_at, row
from gpufleet.forecast.estimate import Settings
from gpufleet.simulate.config import SimulationConfig
from gpufleet.trace import write_trace
from gpufleet.trace.job import Job, JobKind

from .conftest import World
from .conftest import invoke as run

runner = CliRunner()
DAY = 86_400
ARGS = ("--moments", "2", "--samples", "6", "--workers", "1")


def invoke(files: tuple[Path, Path], *args: str) -> tuple[int, str]:
    return run("backtest", files, *args)


@pytest.fixture(scope="module")
def doc(files: tuple[Path, Path]) -> dict:  # type: ignore[type-arg]
    code, out = invoke(files, *ARGS, "--json")
    assert code == 0, out
    return json.loads(out)  # type: ignore[no-any-return]


def test_each_moment_is_the_calibrations_own_judgement_of_it(doc: dict, two_days: World) -> None:  # type: ignore[type-arg]
    """The command's figures are ``checks_at``'s on the same run: nothing of its own is counted."""
    assert doc["simulated"] is True and doc["samples"] == 6 and doc["jobs"] == len(two_days.jobs)
    ats = [m["atSeconds"] for m in doc["moments"]]
    first, last = min(j.submit_s for j in two_days.jobs), max(j.submit_s for j in two_days.jobs)
    assert ats == sorted(ats) and all(first + DAY <= at <= last for at in ats)  # after --skip, by the last arrival
    settings = Settings(samples=6, seed=1, workers=1, horizon_s=6 * DAY)
    at, got = ats[0], doc["moments"][0]
    truth = two_days.truth
    checks = checks_at(two_days.fleet, two_days.jobs, truth.outcome, truth.records, at, settings=settings,
                       config=SimulationConfig())  # fmt: skip
    want = row(str(at), checks)
    assert (got["admissions"], got["coverage"], got["censored"]) == (
        want.admissions,
        round(want.coverage, 4),
        want.censored,
    )
    assert (got["early"], got["late"]) == (sum(c.early for c in checks), sum(c.late for c in checks))


def test_the_totals_are_the_moments_and_the_teams_summed(doc: dict) -> None:  # type: ignore[type-arg]
    a = doc["all"]
    assert a["admissions"] == sum(m["admissions"] for m in doc["moments"]) == sum(t["admissions"] for t in doc["teams"])
    assert a["admissions"] == sum(w["admissions"] for w in doc["waits"])
    covered = sum(round(m["coverage"] * m["admissions"]) for m in doc["moments"] if m["admissions"])
    assert math.isclose(a["coverage"], covered / a["admissions"], abs_tol=1e-4)
    assert a["moments"] == 2 and a["overMoments"][0] <= a["coverage"] <= a["overMoments"][1]
    assert a["early"] + a["late"] == a["admissions"] - covered
    assert doc["line"].startswith("forecast calibration (simulated): 80 % interval covers ")


def test_the_text_names_every_table_simulated_and_ends_with_the_figure(files: tuple[Path, Path], doc: dict) -> None:  # type: ignore[type-arg]
    code, out = invoke(files, *ARGS)
    assert code == 0, out
    for title in ("Per moment (simulated)", "Per team (simulated)", "Per wait"):
        assert title in out
    assert doc["line"] in out  # the same seed, the same figure
    assert "over moments:" in out and "the goal is 75-85 %" in out


@pytest.mark.parametrize(
    ("args", "where", "says"),
    [
        (("--skip", "3d"), "--skip", "nothing is left after the first 3 d"),
        (("--skip", "soon"), "--skip", "expected seconds or a duration"),
        (("--horizon", "0"), "--horizon", "expected seconds or a duration"),
    ],
)
def test_a_mistake_is_answered_with_its_option_and_exit_2(
    files: tuple[Path, Path], args: tuple[str, ...], where: str, says: str
) -> None:
    code, out = invoke(files, *args)
    assert code == 2, out
    assert where in out and says in out
    assert "Traceback" not in out


def test_a_trace_that_is_not_there_is_named(files: tuple[Path, Path], tmp_path: Path) -> None:
    policy, _ = files
    missing = tmp_path / "nope.csv"
    result = runner.invoke(app, ["backtest", "--policy", str(policy), "--trace", str(missing)])
    assert result.exit_code == 2, result.output
    assert "nope.csv" in result.output and "Traceback" not in result.output
    assert not missing.exists()  # a reading command creates nothing


def test_a_trace_the_policy_can_never_admit_is_said_so_not_printed_as_a_figure(
    files: tuple[Path, Path], two_days: World, tmp_path: Path
) -> None:
    policy, _ = files
    trace = tmp_path / "elsewhere.csv"
    write_trace([replace(j, gpu_models=("B999",)) for j in two_days.jobs], trace)  # no pool has that card
    code, out = run("backtest", (policy, trace), *ARGS)
    assert code == 0, out
    assert f"{len(two_days.jobs)} of the trace's jobs can never be admitted under the policy" in out
    assert "no admission to judge" in out and "nan" not in out


def test_a_moment_drawn_twice_is_judged_once() -> None:
    jobs = [Job(f"j{i}", "t", "t", i, 60, JobKind.BATCH_EVAL) for i in (0, 10)]
    ats = moments_of(jobs, 50, 1, 5)  # 50 draws among the seconds 5 to 10
    assert ats == sorted(set(ats)) and set(ats) <= set(range(5, 11)) and len(ats) > 1
