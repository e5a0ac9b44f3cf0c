"""``gpufleet demo``: the whole chain on the bundled example, with no cluster.

Plans and renders the example fleet, synthesizes a week of work for its teams (one of them floods
the queue), simulates that week twice (first apply, then the queue under the example policy),
names the example policy's pathologies, tunes the policy with a bounded budget (``gpufleet tune``:
the input policy, the reasoned candidates, then the sampler), writes the simulated allocations into
a SQLite ledger and renders the reports, all into one folder, which replaces the target only when
it is missing, empty or an earlier gpufleet output (``gpufleet.outputs``). Every figure is simulated.
"""

from __future__ import annotations

import importlib.resources
import json
import os
from dataclasses import dataclass
from pathlib import Path

from gpufleet.outputs import check, mark, replace_folder
from gpufleet.plan import Plan, make_plan
from gpufleet.policy import Fleet, parse_policy, resolve
from gpufleet.render import render
from gpufleet.render.bundle import write_files
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.engine import Progress
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import Assessment, Written, compare, results_document, write_into
from gpufleet.trace import Job, SynthSpec, synthesize, write_trace
from gpufleet.trace.synth import fleet_spec
from gpufleet.tune import output
from gpufleet.tune.study import JOURNAL, StudySpec, Tick
from gpufleet.tune.tuning import Tuning, tune

EXAMPLE = "fleet.yaml"
MANIFESTS = "manifests"
SIMULATION = "simulation"
LEDGER = "ledger.sqlite"
SEED = 20260105
DAYS = 7
LOAD = 0.8  # offered GPU-hours over the queued pools' GPU-hours
TUNE = "tune"
TRIALS = 4  # the input policy and three reasoned candidates: about 30 s on two cores
DAY = 86_400


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
    tuning: Tuning
    tune_folder: Path
    days: int = DAYS


def example_text(name: str = EXAMPLE) -> str:
    return (importlib.resources.files("gpufleet.examples") / name).read_text(encoding="utf-8")


def workload_spec(fleet: Fleet, *, days: int = DAYS, load: float = LOAD) -> SynthSpec:
    """A synthetic workload for the policy's teams on its queued pools (``trace synth POLICY`` makes the same)."""
    return fleet_spec(fleet, days=days, load=load)


def run_demo(
    out: Path,
    progress: Progress | None = None,
    *,
    days: int = DAYS,
    force: bool = False,
    trials: int = TRIALS,
    workers: int | None = None,
    tick: Tick | None = None,
) -> DemoResult:
    """Everything goes into a folder beside ``out`` that replaces it at the end (``gpufleet.outputs``):
    a folder gpufleet did not write, its policy file and its ledger are never overwritten."""
    target = check(out, force=force)  # refuse before a minute of simulation, not after
    text = example_text()
    fleet = resolve(parse_policy(text, str(target.path / EXAMPLE)))
    plan = make_plan(fleet)
    jobs_list: list[Job] = synthesize(workload_spec(fleet, days=days), SEED)
    results = compare(fleet, jobs_list, SimulationConfig(), [Mode.FIRST_APPLY, Mode.QUEUE], progress)
    source = f"synthetic {days}-day week, seed {SEED}"
    records = [rec for r in results for rec in r.records]

    with replace_folder(out, "demo", force=force) as staging:
        (staging / EXAMPLE).write_text(text, encoding="utf-8")
        (staging / "plan.json").write_text(json.dumps(plan.as_dict(), indent=2), encoding="utf-8")
        bundle = render(fleet)
        (staging / MANIFESTS).mkdir()
        write_files(bundle, staging / MANIFESTS)
        mark(staging / MANIFESTS, "render")
        write_trace(jobs_list, staging / "trace.csv")
        from gpufleet.ledger.store import Ledger  # SQLAlchemy loads here, not with every command

        with Ledger.open(str(staging / LEDGER)) as ledger:  # a fresh ledger, created by this run
            ledger.append(records)
        spec = StudySpec(str(staging / TUNE / JOURNAL), trials=trials, jobs=workers or os.cpu_count() or 1, seed=SEED)
        week = (0, days * DAY)  # goodput within the synthesized week, the same window for every world
        tuning = tune(fleet.policy, jobs_list, spec, tick=tick, baseline=(results[0], results[1]), window=week)
        output.write(tuning, staging / TUNE, source, len(jobs_list), simulation=False)
        mark(staging / TUNE, "tune")
        # the report shows the three worlds, each judged under its own policy over the week
        worlds = [w.result for w in tuning.worlds]
        judged = [Assessment(w.result, w.measures, list(w.findings)) for w in tuning.worlds]
        document = results_document(fleet, source, len(jobs_list), worlds, judged)
        written = write_into(staging / SIMULATION, document, worlds)
        mark(staging / SIMULATION, "simulate")
    final = out  # the paths as the user named them
    return DemoResult(
        policy=final / EXAMPLE,
        plan=plan,
        plan_json=final / "plan.json",
        manifests=sorted(final / MANIFESTS / name for name in bundle.contents()),
        trace=final / "trace.csv",
        jobs=len(jobs_list),
        results=results,
        written=written.moved(staging, final),
        ledger=final / LEDGER,
        ledger_records=len(records),
        tuning=tuning,
        tune_folder=final / TUNE,
        days=days,
    )
