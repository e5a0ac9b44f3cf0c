"""A ``gpufleet simulate`` killed with SIGKILL while it writes leaves the old output (or none), never half.

The process is real and really killed: the test waits until the staging sibling appears (the run has
finished simulating and is writing its files) and sends SIGKILL at once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpufleet.demo import SEED, example_text, workload_spec
from gpufleet.outputs import MARKER
from gpufleet.policy import parse_policy, resolve
from gpufleet.trace import synthesize, write_trace

FILES = {"results.json", "allocations.jsonl", "jobs.csv", "jobs.parquet", "report.html", "charts", MARKER}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The bundled example policy and one synthetic day for its teams (a few seconds to simulate)."""
    folder = tmp_path_factory.mktemp("inputs")
    policy, trace = folder / "fleet.yaml", folder / "trace.csv"
    policy.write_text(example_text())
    fleet = resolve(parse_policy(example_text(), str(policy)))
    write_trace(synthesize(workload_spec(fleet, days=1), SEED), trace)
    return policy, trace


def _simulate(inputs: tuple[Path, Path], out: Path) -> subprocess.Popen[bytes]:
    policy, trace = inputs
    command = [sys.executable, "-m", "gpufleet", "simulate", str(policy), "--trace", str(trace), "-o", str(out)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _kill_while_writing(inputs: tuple[Path, Path], out: Path) -> bool:
    """Start a run and SIGKILL it as soon as its staging folder exists; False if it finished first."""
    run = _simulate(inputs, out)
    deadline = time.monotonic() + 300
    try:
        while run.poll() is None and time.monotonic() < deadline:
            if any(p.name.startswith(f".{out.name}.gpufleet-{run.pid}-") for p in out.parent.iterdir()):
                os.kill(run.pid, signal.SIGKILL)
                run.wait()
                return True
            time.sleep(0.002)
        return False
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def _complete(out: Path) -> None:
    assert {p.name for p in out.iterdir()} == FILES
    document = json.loads((out / "results.json").read_text())
    assert list(document["runs"]) == ["queue"]
    marker = json.loads((out / MARKER).read_text())
    assert set(marker["entries"]) >= {"results.json", "report.html", "charts"}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_run_killed_while_writing_its_first_output_leaves_none(inputs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _kill_while_writing(inputs, out), "the run finished before it could be killed while writing"
    assert not out.exists(), "no half-written folder under the output's name"
    leftovers = [p.name for p in tmp_path.iterdir()]
    assert leftovers and all(name.startswith(".out.gpufleet-") for name in leftovers), leftovers

    # the next run writes a whole output and sweeps the dead run's hidden sibling
    assert _simulate(inputs, out).wait() == 0
    _complete(out)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_run_killed_while_replacing_an_earlier_output_leaves_it_byte_for_byte(
    inputs: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert _simulate(inputs, out).wait() == 0
    _complete(out)
    before = _snapshot(out)
    assert _kill_while_writing(inputs, out), "the run finished before it could be killed while writing"
    assert _snapshot(out) == before
    assert all(p.name == "out" or p.name.startswith(".out.gpufleet-") for p in tmp_path.iterdir())
