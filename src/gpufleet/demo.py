"""``gpufleet demo``: the whole chain on the bundled example, with no cluster.

Plans and renders the example fleet, synthesizes a week of work for its teams (one of them floods
the queue), simulates that week twice (first apply, then the queue), writes the simulated
allocations into a SQLite ledger, and renders the report, all into one folder, which replaces the
target only when it is missing, empty or an earlier gpufleet output (``gpufleet.outputs``).
"""

from __future__ import annotations

import importlib.resources
import json
from dataclasses import dataclass
from pathlib import Path

from gpufleet.ledger.store import Ledger
from gpufleet.outputs import check, mark, replace_folder
from gpufleet.plan import Plan, make_plan
from gpufleet.policy import Fleet, parse_policy, resolve
from gpufleet.render import render
from gpufleet.render.bundle import write_files
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.engine import Progress
from gpufleet.simulate.run import RunResult, Written, compare, results_document, write_into
from gpufleet.trace import Job, SynthSpec, synthesize, write_trace
from gpufleet.trace.synth import fleet_spec

EXAMPLE = "fleet.yaml"
MANIFESTS = "manifests"
SIMULATION = "simulation"
LEDGER = "ledger.sqlite"
SEED = 20260105
DAYS = 7
LOAD = 0.8  # offered GPU-hours over the queued pools' GPU-hours


@dataclass(frozen=True)
class DemoResult:
    policy: Path
    plan: Plan
    plan_json: Path
    manifests: list[Path]
    trace: Path
    jobs: int
    results: list[RunResult]
    written: Written
    ledger: Path
    ledger_records: int


def example_text(name: str = EXAMPLE) -> str:
    return (importlib.resources.files("gpufleet.examples") / name).read_text(encoding="utf-8")


def workload_spec(fleet: Fleet, *, days: int = DAYS, load: float = LOAD) -> SynthSpec:
    """A synthetic workload for the policy's teams on its queued pools (``trace synth POLICY`` makes the same)."""
    return fleet_spec(fleet, days=days, load=load)


def run_demo(out: Path, progress: Progress | None = None, *, days: int = DAYS, force: bool = False) -> DemoResult:
    """Everything goes into a folder beside ``out`` that replaces it at the end (``gpufleet.outputs``):
    a folder gpufleet did not write, its policy file and its ledger are never overwritten."""
    target = check(out, force=force)  # refuse before a minute of simulation, not after
    text = example_text()
    fleet = resolve(parse_policy(text, str(target.path / EXAMPLE)))
    plan = make_plan(fleet)
    jobs: list[Job] = synthesize(workload_spec(fleet, days=days), SEED)
    results = compare(fleet, jobs, SimulationConfig(), [Mode.FIRST_APPLY, Mode.QUEUE], progress)
    document = results_document(fleet, f"synthetic {days}-day week, seed {SEED}", len(jobs), results)
    records = [rec for r in results for rec in r.records]

    with replace_folder(out, "demo", force=force) as staging:
        (staging / EXAMPLE).write_text(text, encoding="utf-8")
        (staging / "plan.json").write_text(json.dumps(plan.as_dict(), indent=2), encoding="utf-8")
        bundle = render(fleet)
        (staging / MANIFESTS).mkdir()
        write_files(bundle, staging / MANIFESTS)
        mark(staging / MANIFESTS, "render")
        write_trace(jobs, staging / "trace.csv")
        written = write_into(staging / SIMULATION, document, results)
        mark(staging / SIMULATION, "simulate")
        with Ledger.open(str(staging / LEDGER)) as ledger:  # a fresh ledger, created by this run
            ledger.append(records)
    final = out  # the paths as the user named them
    return DemoResult(
        policy=final / EXAMPLE,
        plan=plan,
        plan_json=final / "plan.json",
        manifests=sorted(final / MANIFESTS / name for name in bundle.contents()),
        trace=final / "trace.csv",
        jobs=len(jobs),
        results=results,
        written=written.moved(staging, final),
        ledger=final / LEDGER,
        ledger_records=len(records),
    )
