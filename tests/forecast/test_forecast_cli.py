"""``gpufleet forecast --policy --trace --at``: the table, the JSON, and every user mistake answered
with exit 2 and a located message, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.forecast.answer import parse_time
from gpufleet.forecast.estimate import WAITING
from gpufleet.forecast.simulated import moment_at
from gpufleet.simulate.config import SimulationConfig

from .conftest import World
from .conftest import invoke as run

AT = 61_234


def invoke(files: tuple[Path, Path], *args: str) -> tuple[int, str]:
    return run("forecast", files, *args)


def test_json_gives_every_waiting_workload_its_quantiles_in_seconds(files: tuple[Path, Path], two_days: World) -> None:
    code, out = invoke(files, "--at", str(AT), "--samples", "8", "--json")
    assert code == 0, out
    doc = json.loads(out)
    moment = moment_at(two_days.fleet, two_days.jobs, two_days.truth.records, AT, config=SimulationConfig())
    waiting = sorted(r.key for r in moment.simulation.runs if r.state in WAITING)
    assert [w["workload"] for w in doc["workloads"]] == waiting
    assert doc["basis"]["samples"] == 8 and doc["basis"]["arrivalsIncluded"] is True
    assert sum(doc["basis"]["runtimeSources"].values()) > 0
    for w in doc["workloads"]:
        if w["declined"]:
            assert w["admissionSeconds"] is None and "never" in w["declined"]
            continue
        q = w["admissionSeconds"]
        bounds = [q[k] if q[k] is not None else float("inf") for k in ("p10", "p50", "p90")]
        assert bounds == sorted(bounds) and bounds[0] >= 0


def test_the_same_seed_gives_the_same_forecast(files: tuple[Path, Path]) -> None:
    first = invoke(files, "--at", str(AT), "--samples", "5", "--json", "--no-arrivals")
    assert first == invoke(files, "--at", str(AT), "--samples", "5", "--json", "--no-arrivals")
    assert json.loads(first[1])["basis"]["arrivalsIncluded"] is False


def test_the_table_names_the_workload_and_what_the_estimate_rests_on(files: tuple[Path, Path]) -> None:
    code, out = invoke(files, "--at", "17h", "--samples", "5")
    assert code == 0, out
    assert "Expected admission of the workloads waiting at 17 h" in out
    assert "sampled futures (seed 0)" in out and "future arrivals included" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--at", "9d"], "outside the trace"),
        (["--at", "0"], "outside the trace"),
        (["--at", "yesterday"], "expected seconds from the trace's start"),
        (["--at", str(AT), "--workload", "nlp/no-such-job"], "no workload nlp/no-such-job"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(files: tuple[Path, Path], args: list[str], message: str) -> None:
    code, out = invoke(files, *args)
    assert code == 2
    assert message in " ".join(out.split())
    assert "Traceback" not in out


def test_a_workload_already_admitted_is_told_when(files: tuple[Path, Path], two_days: World) -> None:
    moment = moment_at(two_days.fleet, two_days.jobs, two_days.truth.records, AT, config=SimulationConfig())
    running = next(r for r in moment.simulation.runs if r.state.value == "Running")
    code, out = invoke(files, "--at", str(AT), "--workload", running.key)
    assert code == 2
    assert f"it was admitted at {running.attempt.reserved} s" in " ".join(out.split())


def test_one_waiting_workload_gets_its_sentence(files: tuple[Path, Path], two_days: World) -> None:
    moment = moment_at(two_days.fleet, two_days.jobs, two_days.truth.records, AT, config=SimulationConfig())
    waiting = next(r for r in moment.simulation.runs if r.state in WAITING)
    code, out = invoke(files, "--at", str(AT), "--workload", waiting.key, "--samples", "5", "--json")
    assert code == 0
    (only,) = json.loads(out)["workloads"]
    assert only["workload"] == waiting.key
    assert only["text"].startswith(("expected to start in", "not expected to start"))


@pytest.mark.parametrize(("text", "seconds"), [("86400", 86_400), ("2d4h30m", 189_000), ("90s", 90), ("1h5s", 3605)])
def test_a_moment_is_seconds_or_a_duration(text: str, seconds: int) -> None:
    assert parse_time(text) == seconds
