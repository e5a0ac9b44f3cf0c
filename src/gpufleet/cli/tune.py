"""``gpufleet tune``: search the policy's knobs in the twin for a better queue, and say why it is better."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from gpufleet import outputs
from gpufleet.cli.common import (
    ForceOpt,
    JsonOpt,
    console,
    counting_bar,
    err_console,
    guarded,
    output_option,
    print_kept,
    print_table,
)
from gpufleet.cli.simulate_federation import print_question
from gpufleet.durations import human
from gpufleet.errors import InputError
from gpufleet.policy import FleetPolicy, load_policy
from gpufleet.trace import read_trace
from gpufleet.trace.job import Job
from gpufleet.tune import clusters, output
from gpufleet.tune.fidelity import Fidelity, for_flags
from gpufleet.tune.holdout import Week, bootstrap
from gpufleet.tune.objectives import Constraints
from gpufleet.tune.study import DEFAULT_NAME, JOURNAL, StudySpec, Tick
from gpufleet.tune.tuning import Tuning, World, tune

EXIT_NOTHING_FEASIBLE = 1  # a finding: no trial met the constraints


@contextmanager
def study_bar(total: int, *, quiet: bool = False) -> Iterator[tuple[Tick, Callable[[str], None]]]:
    """A rich bar over the study's finished trials (on stderr), and a line for each stage."""
    with counting_bar("{task.description}", quiet=quiet) as bar:
        task = bar.add_task("tuning", total=total)

        def tick(done: int) -> None:
            bar.update(task, completed=min(done, total), description="trials")

        def stage(text: str) -> None:
            bar.update(task, description=text)

        yield tick, stage


def _hours(seconds: int | None) -> str:
    return "–" if seconds is None else human(seconds)


def _rows(w: World) -> dict[str, str]:
    m = w.measures
    rows = {
        "goodput GPU-h": f"{m.goodput_gpu_h:,.0f}",
        "held idle GPU-h": f"{m.held_idle_gpu_h:,.0f}",
        "lost GPU-h (preempted)": f"{m.lost_gpu_h:,.0f}",
        "usable idle GPU-h": f"{sum(m.usable_idle_gpu_h.values()):,.0f}",
        "makespan": _hours(m.makespan_s),
    }
    for t in m.teams:
        rows[f"{t.team} p95 wait"] = _hours(t.wait_p95_s)
    rows["serving starved repl-min"] = f"{m.serving_starved_replica_min:,.0f}"
    rows["most preemptions of a job"] = str(m.preemptions_max)
    rows["Jain (goodput/fair share)"] = "–" if m.jain is None else f"{m.jain:.3f}"
    return rows


def print_worlds(worlds: tuple[World, ...], title: str = "Three worlds (all figures simulated)") -> None:
    """first-apply, the input policy and the tuned one, measure by measure (fits 100 columns)."""
    table = Table(title=title, title_justify="left")
    table.add_column("measure", no_wrap=True)
    for w in worlds:
        table.add_column(w.name, justify="right")
    columns = [_rows(w) for w in worlds]
    for label in columns[0]:
        table.add_row(label, *[c.get(label, "–") for c in columns])
    print_table(table)
    for w in worlds:
        names = ", ".join(sorted({f.reason.value for f in w.findings})) or "none"
        console.print(f"  pathologies, {w.name}: {names}", highlight=False, markup=False)


def print_front(t: Tuning) -> None:
    base = t.space.base_params()
    table = Table(title="Pareto front (feasible trials; simulated)", title_justify="left")
    for name in ("trial", "source", "goodput GPU-h", "worst p95 wait", "changes", ""):
        table.add_column(name, justify="left" if name in ("source", "") else "right", no_wrap=True)
    for c in t.front:
        chosen = "← recommended" if t.recommended is not None and c.number == t.recommended.number else ""
        changes = sum(1 for k, v in c.params.items() if base.get(k) != v)
        table.add_row(
            str(c.number), c.source, f"{c.goodput_gpu_h:,.0f}", human(int(c.worst_p95_h * 3600)), str(changes), chosen
        )
    print_table(table)
    console.print(
        f"trials: {len(t.trials)} ran to their end, {t.stopped} stopped early (a constraint broken for good, or "
        f"behind their peers with --rung-hours: prunedAt in study.journal), {t.pruned - t.stopped} not a valid policy",
        highlight=False,
    )


def print_diff(t: Tuning) -> None:
    if not t.changes:
        console.print("The recommended policy is the input policy: no trial beat it under the constraints.")
        return
    console.print("[bold]What changes, and why[/] (effects simulated)")
    for c in t.changes:
        console.print(f"  {c.where}: {c.before} → {c.after}", highlight=False, markup=False, soft_wrap=True)
        console.print(f"    {c.explanation()}", highlight=False, markup=False)


def print_infeasible(t: Tuning) -> None:
    """What the search did not reach: what no knob can do (with the capacity that would), no feasible
    trial, held-out failures and first apply not beaten; each reason says which it is."""
    if not t.infeasible:
        return
    console.print("[bold]What the search did not reach, and why[/] (simulated and static evidence)")
    for i in t.infeasible:
        console.print(f"  {i.reason}: {i.message}", highlight=False, markup=False, soft_wrap=True)
        for line in i.evidence:
            console.print(f"    {line}", highlight=False, markup=False, soft_wrap=True)
        console.print(f"    would make it feasible: {i.needed}", highlight=False, markup=False, soft_wrap=True)


def _cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 10 else f"{value:.3f}"
    return str(value)


def print_heldout(t: Tuning) -> None:
    """The held-out weeks: first apply, the input and the judged candidate on each (fits 100 columns)."""
    rows = t.heldout_table()
    if not rows:
        return
    shown = t.shown
    title = "Held-out weeks (simulated; ✓ meets every constraint there)"
    if shown:
        title += f"; tuned = trial {shown.candidate.number}"
    table = Table(title=title, title_justify="left")
    teams = list(rows[0]["p95WaitSeconds"])  # type: ignore[call-overload]
    for name in (
        "week",
        "world",
        "goodput",
        *(f"{x[:8]} p95" for x in teams),
        "Jain",
        "preempt",
        "strand",
        "never",
        "ok",
    ):
        table.add_column(name, justify="left" if name in ("week", "world") else "right", no_wrap=True)
    for r in rows:
        waits: dict[str, int | None] = r["p95WaitSeconds"]  # type: ignore[assignment]
        ok = r.get("meetsConstraints")
        table.add_row(
            str(r["week"]),
            str(r["world"]) + ("" if ok is None else " ✓" if ok else " ✗"),
            _cell(r["goodputGpuHours"]),
            *(_hours(waits[x]) for x in teams),
            _cell(r["jain"]),
            _cell(r["preemptionsMax"]),
            _cell(r["stranded"]),
            _cell(r["neverRan"]),
        )
    print_table(table)


def print_questions(t: Tuning) -> None:
    """A federation's two questions, per team, for the recommended policy (every figure simulated)."""
    for c in t.questions:
        print_question(c, "the recommended policy, same trace and window")


def _resume(target: outputs.Target, staging: Path) -> None:
    """Carry the earlier run's study journal into the new folder: the study goes on from there."""
    old = target.path / JOURNAL
    if target.state is outputs.State.OURS and old.is_file():
        shutil.copy2(old, staging / JOURNAL)


def _document(t: Tuning, out: Path, trace: str) -> dict[str, Any]:
    doc = output.document(t, trace)
    doc["files"] = {
        "policy": str(out / output.POLICY),
        "document": str(out / output.DOCUMENT),
        "trials": str(out / output.TRIALS),
        "simulation": str(out / output.SIMULATION),
    }
    return doc


def _window(hours: float | None) -> tuple[int, int] | None:
    return None if hours is None else (0, round(hours * 3600))


def _work(
    policy: FleetPolicy,
    jobs: list[Job],
    storage: str | None,
    spec: StudySpec,
    *,
    constraints: Constraints,
    window_hours: float | None,
    fidelity: Fidelity | None,
) -> None:
    """A cluster worker: run trials in the shared study until it holds its total, then say how many."""
    if storage is None or "://" not in storage:
        raise InputError.one(
            "a worker joins a study in a database: give --storage postgresql://… (or GPUFLEET_STUDY_STORAGE)",
            path="--storage",
        )
    result = tune(
        policy, jobs, spec, constraints=constraints, window=_window(window_hours), fidelity=fidelity,
        search_only=True,
    )  # fmt: skip
    typer.echo(f"worker done: study {spec.name!r} holds {len(result.trials) + result.pruned} finished trials")


@guarded
def tune_command(
    policy: Annotated[Path, typer.Argument(help="The fleet policy to start from (YAML)", show_default=False)],
    *,
    trace: Annotated[Path, typer.Option("--trace", help="A job trace in gpufleet's format (.csv or .parquet)")],
    trials: Annotated[
        int, typer.Option("--trials", min=1, help="The study's total trials, the input policy included")
    ] = 30,
    jobs: Annotated[int | None, typer.Option("--jobs", min=1, help="Worker processes [default: the cores]")] = None,
    storage: Annotated[
        str | None,
        typer.Option(
            "--storage",
            envvar="GPUFLEET_STUDY_STORAGE",
            show_envvar=True,
            help="An Optuna database URL (postgresql://…) shared by workers on many machines",
        ),
    ] = None,
    worker: Annotated[
        int | None,
        typer.Option(
            "--worker",
            min=0,
            help="Run as cluster worker INDEX: only the study's trials in --storage, nothing written "
            "(`gpufleet tune-job` renders such workers; docs/tune.md)",
        ),
    ] = None,
    study_name: Annotated[str, typer.Option("--study", help="The study's name in its storage")] = DEFAULT_NAME,
    max_preemptions: Annotated[int, typer.Option(min=0, help="No job may be preempted more often")] = 3,
    min_jain: Annotated[
        float,
        typer.Option(
            min=0.0, max=1.0, help="Jain fairness over goodput ÷ the weighted max-min fair share, at least this"
        ),
    ] = 0.95,
    keep_guarantees: Annotated[
        bool, typer.Option("--keep-guarantees", help="Every team must be able to take back its nominal quota")
    ] = False,
    seed: Annotated[int, typer.Option(help="The sampler's seed")] = 0,
    window_hours: Annotated[
        float | None,
        typer.Option(
            "--window-hours",
            min=0.0,
            help="Measure every world over the trace's first H hours [default: until the shorter of "
            "first apply and the input policy ends]",
        ),
    ] = None,
    holdout: Annotated[
        int,
        typer.Option(
            "--holdout",
            min=0,
            help="Judge the recommendation on N weeks resampled from the trace (per-team day blocks) too",
        ),
    ] = 0,
    holdout_trace: Annotated[
        list[Path] | None,
        typer.Option("--holdout-trace", help="A week to judge the recommendation on (repeatable)"),
    ] = None,
    rung_hours: Annotated[
        float | None,
        typer.Option(
            "--rung-hours",
            min=0.0,
            help="Run trials in rungs from H hours (×3 each) and stop poor ones early (docs/tune.md) [default: off]",
        ),
    ] = None,
    whole_runs: Annotated[
        bool,
        typer.Option(
            "--whole-runs",
            help="Run every trial to its end; by default a trial that breaks a constraint for good (a "
            "preemption loop) stops at the next simulated day's end, which changes no recommendation",
        ),
    ] = False,
    output_dir: Annotated[Path, output_option("Folder for the recommendation, the study and the report")] = Path(
        "tune-out"
    ),
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Search the policy's knobs in the twin: goodput up, the worst team's p95 wait down, under constraints.

    The input policy is trial 0, so the recommendation is never worse than it. The output
    folder gets the recommended policy (recommended.yaml, valid for plan and render), every
    trial (trials.csv), the diff with the pathology each change removes (tune.json) and the
    three worlds' report (simulation/). Every figure is simulated."""
    fleet_policy = load_policy(policy)
    clusters.refuse_rungs(fleet_policy, bool(rung_hours), str(policy))  # a federation: trials run whole (exit 2)
    fidelity = None if clusters.federated(fleet_policy) else for_flags(rung_hours, whole_runs)  # it cannot pause
    jobs_list = read_trace(trace)
    if not jobs_list:
        raise InputError.one("the trace holds no jobs", file=str(trace))
    constraints = Constraints(max_preemptions=max_preemptions, min_jain=min_jain, keep_guarantees=keep_guarantees)
    if worker is not None:  # a cluster worker's sampler seed differs from every other worker's
        spec = StudySpec(storage or "", study_name, trials, 1, seed + 1 + worker)
        _work(
            fleet_policy,
            jobs_list,
            storage,
            spec,
            constraints=constraints,
            window_hours=window_hours,
            fidelity=fidelity,
        )
        return
    weeks = [Week(p.name, tuple(read_trace(p))) for p in holdout_trace or []]
    weeks += bootstrap(jobs_list, holdout, seed)
    target = outputs.check(output_dir, force=force)
    workers = jobs or max(os.cpu_count() or 1, 1)
    with outputs.replace_folder(output_dir, "tune", force=force) as staging:
        if storage is None:
            _resume(target, staging)
        spec = StudySpec(str(staging / JOURNAL) if storage is None else storage, study_name, trials, workers, seed)
        with study_bar(trials, quiet=as_json) as (tick, stage):
            result = tune(
                fleet_policy,
                jobs_list,
                spec,
                constraints=constraints,
                tick=tick,
                stage=stage,
                window=_window(window_hours),
                holdout=weeks,
                fidelity=fidelity,
            )
        output.write(result, staging, str(trace), len(jobs_list))
    if as_json:
        typer.echo(json.dumps(_document(result, target.path, str(trace)), indent=2))
    else:
        print_worlds(result.worlds)
        console.print()
        print_front(result)
        console.print()
        print_diff(result)
        print_infeasible(result)
        print_heldout(result)
        print_questions(result)
        console.print(f"\nrecommended policy: {output_dir / output.POLICY}", highlight=False, soft_wrap=True)
        console.print(
            f"trials: {output_dir / output.TRIALS}; report: {output_dir / output.SIMULATION}/report.html",
            highlight=False,
            soft_wrap=True,
        )
        print_kept(target)
    if result.recommended is None:
        if not as_json:
            why = [
                i for i in result.infeasible if i.blocks or i.reason in {"NoTrialFeasible", "HeldOutConstraintFails"}
            ]
            for i in why:
                err_console.print(f"{i.reason}: {i.message}", highlight=False, markup=False, soft_wrap=True)
            if not why:
                err_console.print("no trial met the constraints: " + "; ".join(constraints.describe()))
        raise typer.Exit(EXIT_NOTHING_FEASIBLE)
