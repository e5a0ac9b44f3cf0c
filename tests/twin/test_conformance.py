"""Conformance: every scenario in ``scenarios/`` restates a fact from Kueue's own scheduler tests.

A scenario file is a YAML stream of real Kueue objects plus one ``kind: TwinScenario`` document
(format in docs/twin.md): which Kueue test case it restates, how many cycles to run, and the
expected outcome. The objects go through the same core path as ``gpufleet twin step --json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.twin.clocks import ClockSettings
from gpufleet.twin.step import step

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))


def _load(path: Path) -> tuple[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    meta = [d for d in docs if d.get("kind") == "TwinScenario"]
    assert len(meta) == 1, f"{path.name}: exactly one TwinScenario document expected"
    objects = [d for d in docs if d.get("kind") != "TwinScenario"]
    return yaml.safe_dump_all(objects), meta[0]


def _subset(expected: dict[str, Any], actual: dict[str, Any], where: str) -> None:
    for key, want in expected.items():
        assert key in actual, f"{where}: missing {key!r} in {actual}"
        if isinstance(want, dict):
            _subset(want, actual[key], f"{where}.{key}")
        else:
            assert actual[key] == want, f"{where}.{key}: want {want!r}, got {actual[key]!r}"


def test_at_least_25_scenarios() -> None:
    assert len(SCENARIOS) >= 25


def _worlds() -> list[tuple[Path, bool]]:
    """Every scenario in Kueue's unit-test world (no clocks), and on Kueue's clocks too unless it
    says ``clocks: false`` (its fact needs a victim freed, or parked workloads woken, at once)."""
    return [
        (p, clocked)
        for p in SCENARIOS
        for clocked in (False, True)
        if clocked is False or _load(p)[1].get("clocks", True)
    ]


@pytest.mark.parametrize(
    ("path", "clocked"), _worlds(), ids=[f"{p.stem}-{'clocks' if c else 'unit'}" for p, c in _worlds()]
)
def test_scenario(path: Path, clocked: bool) -> None:
    text, meta = _load(path)
    restates = meta["restates"]
    assert restates["file"].startswith("pkg/") and restates["test"] and restates["case"]
    report = step([(path.name, text)], meta.get("cycles"), ClockSettings() if clocked else None)
    expect = meta["expect"]
    for i, want in enumerate(expect.get("cycles", [])):
        assert i < len(report["cycles"]), f"only {len(report['cycles'])} cycle(s) ran"
        got = report["cycles"][i]
        where = f"cycle {i + 1}"
        if "admitted" in want:
            admitted = {a["workload"]: a for a in got["admitted"]}
            assert set(admitted) == set(want["admitted"]), f"{where}: admitted {sorted(admitted)}"
            _subset(want["admitted"], admitted, f"{where}.admitted")
        if "preempted" in want:
            preempted = {p["workload"]: p for p in got["preempted"]}
            assert set(preempted) == set(want["preempted"]), f"{where}: preempted {sorted(preempted)}"
            _subset(want["preempted"], preempted, f"{where}.preempted")
        if "pending" in want:
            pending = {p["workload"]: p for p in got["pending"]}
            _subset(want["pending"], pending, f"{where}.pending")
    _subset(expect.get("clusterQueues", {}), report["clusterQueues"], "clusterQueues")
    _subset(expect.get("localQueues", {}), report.get("localQueues", {}), "localQueues")
