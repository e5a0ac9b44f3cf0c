"""``gpufleet demo``: the whole chain on the bundled example, with no cluster.

Plans and renders the example fleet, synthesizes a week of work for its teams (one of them floods
the queue), simulates that week twice (first apply, then the queue), writes the simulated
allocations into a SQLite ledger, and renders the report, all into one folder.
"""

from __future__ import annotations

import importlib.resources
import json
from dataclasses import dataclass
from pathlib import Path

from gpufleet.ledger.store import Ledger
from gpufleet.plan import Plan, make_plan
from gpufleet.policy import Fleet, parse_policy, resolve
from gpufleet.render import render, write_bundle
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.engine import Progress
from gpufleet.simulate.run import RunResult, Written, compare, results_document, write_outputs
from gpufleet.trace import Job, PoolSpec, Slicing, SynthSpec, TeamSpec, synthesize, write_trace

EXAMPLE = "fleet.yaml"
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


def flood_team(fleet: Fleet) -> str:
    """The team that floods the queue: the lightest weight, the first in the policy on a tie."""
    teams = fleet.policy.teams
    return min(teams, key=lambda t: (t.weight, teams.index(t))).name


def workload_spec(fleet: Fleet, *, days: int = DAYS, load: float = LOAD) -> SynthSpec:
    """A synthetic workload for the policy's teams on its queued pools (the serving pool runs vLLM)."""
    policy = fleet.policy
    locations = {d.name: d.checkpointLocations for d in policy.dataClasses}
    flood = flood_team(fleet)
    teams = tuple(
        TeamSpec(
            name=t.name,
            namespace=t.namespaces[0],
            weight=float(t.weight),
            priority_classes=tuple(t.priorityClasses),
            data_classes=tuple(t.dataClasses),
            models=(f"{t.name}/model",),
            checkpoints=tuple(
                f"{loc.rstrip('/')}/{t.name}/" for d in t.dataClasses for loc in locations.get(d, [])[:1]
            ),
            flood=t.name == flood,
        )
        for t in policy.teams
    )
    pools = []
    for cap in fleet.queued_pools():
        mode = cap.decision.mode
        pools.append(
            PoolSpec(
                name=cap.name,
                gpu_model=cap.gpu.name,
                gpus=cap.pool.gpu_count,
                slicing=Slicing(mode),
                mig_profiles=tuple(p for p, _ in cap.decision.layout or ()) if mode == "mig" else (),
                replicas=cap.decision.replicas or 1,
            )
        )
    return SynthSpec(teams=teams, pools=tuple(pools), days=days, load=load)


def _write_plan(plan: Plan, path: Path) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(plan.as_dict(), indent=2), encoding="utf-8")
    tmp.replace(path)


def run_demo(out: Path, progress: Progress | None = None, *, days: int = DAYS) -> DemoResult:
    out.mkdir(parents=True, exist_ok=True)
    policy_path = out / EXAMPLE
    text = example_text()
    policy_path.write_text(text, encoding="utf-8")
    fleet = resolve(parse_policy(text, str(policy_path)))
    plan = make_plan(fleet)
    plan_json = out / "plan.json"
    _write_plan(plan, plan_json)
    manifests = write_bundle(render(fleet), out / "manifests")

    jobs: list[Job] = synthesize(workload_spec(fleet, days=days), SEED)
    trace = out / "trace.csv"
    write_trace(jobs, trace)
    results = compare(fleet, jobs, SimulationConfig(), [Mode.FIRST_APPLY, Mode.QUEUE], progress)
    simulation = out / "simulation"
    written = write_outputs(
        simulation, results_document(fleet, f"synthetic {days}-day week, seed {SEED}", len(jobs), results), results
    )

    ledger_path = out / "ledger.sqlite"
    ledger_path.unlink(missing_ok=True)  # a fresh ledger per demo run
    records = [rec for r in results for rec in r.records]
    with Ledger.open(str(ledger_path)) as ledger:
        ledger.append(records)
    return DemoResult(
        policy=policy_path,
        plan=plan,
        plan_json=plan_json,
        manifests=manifests,
        trace=trace,
        jobs=len(jobs),
        results=results,
        written=written,
        ledger=ledger_path,
        ledger_records=len(records),
    )
