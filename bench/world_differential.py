"""The simulator against the real control plane on the same trace (issue 32): each measure's distance
beside the real-vs-real noise floor.

Per scenario (``tests/e2e/world_scenarios.py``): the trace is compressed by the scenario's factor and
refused before anything starts when the testbed cannot run it (exit 2, naming the job and the limit);
then ``R`` runs on fresh testbeds (real kube-apiserver, kube-scheduler, Kueue v0.19.2, kwok pods that run
for their durations, ``gpufleet record`` writing the ledger), and a seeded ensemble of ``simulate`` runs on
the same compressed trace (``simulate.differential.ensemble``). Every run is measured from its ledger
records alike (``simulate.differential.from_records``). A measure agrees when the median sim-to-real
distance is within the largest real-vs-real distance (or the ledger's one-second resolution for times).
Then, apart, what compression itself changes: ``simulate`` on the original trace against ``simulate``
on the compressed trace, its times put back on the original scale.

Run: ``python -m bench world_differential [--scenario small|fair|gang|example|tuned|deep|all] [--real-runs R] [--seeds N]
[--factor F] [--work DIR] [--out DIR]``; with ``--work DIR`` the real runs already kept there count
towards ``R`` and only the missing ones run (so runs can be added one at a time); ``--rejudge DIR`` judges the real runs a ``--work DIR`` kept
against the simulator as it is now, without a testbed; a trace the testbed cannot run at its factor exits 2 before
any testbed starts. Ends with ``world differential: N of M measures within the real-vs-real floor (S
scenarios, R real runs each)``. Wall figures move with the machine's load: say the load beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from gpufleet.errors import InputError
from gpufleet.ledger.records import Record
from gpufleet.ledger.store import Ledger
from gpufleet.simulate.differential import (
    WorldMeasures,
    distance,
    ensemble,
    ensemble_config,
    from_records,
    judge,
    measures_of,
    scaled,
)
from gpufleet.testbed import ensure
from gpufleet.testbed.world import ORIGIN, run_real, run_simulated
from gpufleet.trace.compression import check_runnable, compress
from tests.e2e.world_scenarios import SCENARIOS, Scenario

REPO = Path(__file__).resolve().parents[1]


def _fmt(x: float) -> str:
    return "inf" if x == float("inf") else f"{x:.3f}" if abs(x) < 10 else f"{x:.1f}"


def _saved(work: Path, scenario: Scenario) -> list[WorldMeasures]:
    """The real runs a bench with ``--work`` kept: each folder's ledger, from its origin."""
    out = []
    for folder in sorted(work.glob(f"{scenario.name}-real-*")):
        if not (folder / "origin").exists():
            continue  # a run that did not finish
        with Ledger.read(str(folder / "ledger.sqlite")) as ledger:
            records: list[Record] = [*ledger.allocations(), *ledger.waits()]
        out.append(from_records(records, datetime.fromisoformat((folder / "origin").read_text(encoding="utf-8"))))
    return out


def _kept(work: Path, scenario: Scenario, i: int) -> bool:
    return (work / f"{scenario.name}-real-{i}" / "origin").exists()


def run_scenario(
    scenario: Scenario, real_runs: int, seeds: int, work: Path, rejudge: bool = False
) -> tuple[int, int, dict[str, object]]:
    fleet = scenario.fleet()
    jobs = compress(scenario.jobs, scenario.factor)
    check_runnable(jobs, fleet, source=f"scenario {scenario.name}")
    print(f"\n== {scenario.name}: {len(jobs)} jobs, compressed {scenario.factor:g}x, "
          f"{real_runs} real runs, {seeds} simulated (load {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
    real: list[WorldMeasures] = _saved(work, scenario)
    if real:
        print(f"  {len(real)} real runs kept under {work}, judged against the simulator as it is now")
    missing = [] if rejudge else [i for i in range(real_runs + len(real)) if not _kept(work, scenario, i)]
    for i in missing[: max(0, real_runs - len(real))]:
        shutil.rmtree(work / f"{scenario.name}-real-{i}", ignore_errors=True)  # a run that did not finish
        began = time.monotonic()
        run = run_real(fleet, jobs, work / f"{scenario.name}-real-{i}", ensure(REPO),
                       drain_timeout_s=scenario.drain_timeout_s, say=print)  # fmt: skip
        m = from_records(run.records, run.origin)
        real.append(m)
        (work / f"{scenario.name}-real-{i}" / "origin").write_text(run.origin.isoformat(), encoding="utf-8")
        print(f"  real run {i}: {m.finished}/{m.jobs} jobs finished, {sum(m.preemptions.values())} preemptions "
              f"{m.preemptions}, {m.pods_ready_evictions} podsReady evictions; trace wall {run.wall_s:.0f} s, "
              f"run {time.monotonic() - began:.0f} s; undrained {list(run.undrained)}; late {list(run.late)} "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
    sims = [
        from_records(run_simulated(fleet, ensemble(jobs, seed), ensemble_config(seed)), ORIGIN) for seed in range(seeds)
    ]
    verdicts = judge(real, sims)
    print(f"  {'measure':<34} {'unit':<22} {'sim-real':>9} {'floor':>9} {'sim-sim':>9}  agrees")
    for v in verdicts:
        print(f"  {v.measure.name:<34} {v.measure.unit:<22} {_fmt(v.sim_to_real):>9} {_fmt(v.floor):>9} "
              f"{_fmt(v.sim_spread):>9}  {'yes' if v.agrees else 'NO'}")  # fmt: skip
    original = from_records(run_simulated(fleet, list(scenario.jobs)), ORIGIN)
    back = scaled(sims[0], scenario.factor)
    graced = compress(scenario.jobs, scenario.factor, grace=True)
    back_graced = scaled(from_records(run_simulated(fleet, graced), ORIGIN), scenario.factor)
    print(f"  what compression changes (simulate on the original vs on the compressed trace, x{scenario.factor:g},"
          " times put back on the original scale; the second column with the grace periods compressed too):")  # fmt: skip
    for each in measures_of([original, back, back_graced]):
        print(f"    {each.name:<34} {_fmt(distance(each, original, back)):>9} "
              f"{_fmt(distance(each, original, back_graced)):>9} {each.unit}")  # fmt: skip
    agree = sum(v.agrees for v in verdicts)
    doc = {
        "scenario": scenario.name,
        "realRuns": len(real),
        "seeds": seeds,
        "measures": [
            {
                "measure": v.measure.name,
                "unit": v.measure.unit,
                "simToReal": v.sim_to_real,
                "floor": v.floor,
                "simSpread": v.sim_spread,
                "agrees": v.agrees,
            }
            for v in verdicts
        ],
    }
    return agree, len(verdicts), doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="all", choices=[*SCENARIOS, "all"])
    parser.add_argument("--real-runs", type=int, help="testbed runs per scenario (default: the scenario's)")
    parser.add_argument("--factor", type=float, help="compress by this instead of the scenario's factor")
    parser.add_argument("--seeds", type=int, default=5, help="simulated runs of the seeded ensemble")
    parser.add_argument("--work", type=Path, help="keep every run's testbed logs, bundle and ledger under DIR")
    parser.add_argument(
        "--rejudge", type=Path, metavar="DIR",
        help="no testbed: judge the real runs an earlier --work DIR kept against the simulator as it is now",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="write the verdicts as JSON into DIR/world-differential.json")
    args = parser.parse_args()
    chosen = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    agree = total = 0
    runs: set[int] = set()
    docs = []
    with tempfile.TemporaryDirectory(prefix="gpufleet-world-") as tmp:
        work = args.rejudge or args.work or Path(tmp)
        for name in chosen:
            scenario = SCENARIOS[name]()
            if args.factor:
                scenario = replace(scenario, factor=args.factor)
            r = args.real_runs or scenario.real_runs
            if args.rejudge:
                r = len(list(args.rejudge.glob(f"{name}-real-*/origin")))
            try:
                a, n, doc = run_scenario(scenario, r, args.seeds, work, rejudge=args.rejudge is not None)
            except InputError as exc:
                print(f"error: {exc.summary()}", file=sys.stderr)
                return 2
            agree, total = agree + a, total + n
            runs.add(int(str(doc["realRuns"])))
            docs.append(doc)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "world-differential.json").write_text(json.dumps(docs, indent=2) + "\n", encoding="utf-8")
    each = "/".join(str(r) for r in sorted(runs))
    print(f"\nworld differential: {agree} of {total} measures within the real-vs-real floor "
          f"({len(chosen)} scenarios, {each} real runs each)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
