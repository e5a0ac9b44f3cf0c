"""Which module holds each command, and the group that imports that module only when the command runs.

A pre-commit hook that runs ``gpufleet check`` on each file, or a shell completing a word, should not
pay for SQLAlchemy, Optuna, the twin and the webhook's server. Typer builds every command from its
function's signature, so registering the functions eagerly would import every command module and,
through their option types and defaults, most of gpufleet. Here the root group lists each command
by name and summary from ``COMMANDS``; the command's module is imported, and its real command
built, when the command is resolved (to run it, show its ``--help`` or complete its options).
``tests/test_cli_start.py`` checks that each summary is the one its command shows once loaded, and
that a command's run imports nothing another command needs.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class Entry:
    """One root command: its name, ``module:attribute`` (a command function or a ``typer.Typer``
    group), and the first paragraph of its help, shown in the root's listing without importing it."""

    name: str
    target: str
    summary: str


# In the order the root ``--help`` lists them (commands, then groups, as typer itself orders them).
COMMANDS: tuple[Entry, ...] = (
    Entry("schema", "gpufleet.cli.policy:schema", "Print the policy file's JSON Schema (point your editor's YAML plugin at it)."),
    Entry("init", "gpufleet.cli.policy:init", "Write a policy to start from: a commented example, or a starter policy read from a live cluster."),
    Entry("plan", "gpufleet.cli.policy:plan", "Explain how each pool is sliced and whether the quotas fit; with --trace, the pathologies."),
    Entry("render", "gpufleet.cli.policy:render_cmd", "Write the manifests that put Kueue in front of the cards (a kustomize-ready folder)."),
    Entry("worker-secret", "gpufleet.cli.multikueue:worker_secret", "Check a worker's kubeconfig as Kueue's MultiKueue does and write it as the Secret the policy names."),
    Entry("evidence", "gpufleet.cli.evidence:evidence", 'Utilization per pool and team before and after, from DCGM metrics in Prometheus; gaps read "not measured".'),
    Entry("check", "gpufleet.cli.check:check_cmd", "Judge manifests by the fleet's admission rules: exit 0 all admitted, 1 any denied, 2 unreadable input."),
    Entry("scan", "gpufleet.cli.scan:scan", "List GPU pools, GPU pods by team and Kueue's objects, and flag the risks (read-only)."),
    Entry("demo", "gpufleet.cli.demo:demo", "Run the whole chain on the bundled example: plan, render, simulate, find what goes wrong, tune."),
    Entry("tune", "gpufleet.cli.tune:tune_command", "Search the policy's knobs in the twin: goodput up, the worst team's p95 wait down, under constraints."),
    Entry("tune-job", "gpufleet.cli.tune_job:tune_job_command", "Write the Kubernetes Job whose pods run tune workers on one PostgreSQL study."),
    Entry("simulate", "gpufleet.cli.simulate:simulate", "Simulate the queue in front of the cards on a trace, and (with --compare) the first apply."),
    Entry("record", "gpufleet.cli.record:record", "Watch the cluster and write every allocation and wait into the ledger (runs until stopped)."),
    Entry("why", "gpufleet.cli.why:why", "Why a Workload waits: Kueue's reason, what holds its quota, what lets it in; with --policy, when it starts."),
    Entry("what-if", "gpufleet.cli.whatif:whatif", "What applying POLICY would do now: admissions, preemptions, inadmissible work, changed objects."),
    Entry("forecast", "gpufleet.cli.forecast:forecast", "When each waiting workload is expected to be admitted: quantiles of simulated futures, what they rest on."),
    Entry("backtest", "gpufleet.cli.backtest:backtest", "How well the forecast holds on a trace: at seeded moments of its simulated run, every waiting workload forecast and judged."),
    Entry("twin", "gpufleet.cli.twin:app", "Simulate Kueue's admission on real Kueue objects."),
    Entry("trace", "gpufleet.cli.trace:app", "Make, convert and inspect job traces."),
    Entry("webhook", "gpufleet.cli.webhook:app", "The admission webhook (validating and mutating, AdmissionReview v1)."),
    Entry("audit", "gpufleet.cli.audit:audit_app", "Answer who held which GPUs, why a workload waited, and prove the ledger intact."),
)  # fmt: skip


class Summary(TyperCommand):
    """A command not yet imported: enough for the root's listing and for completing its name."""

    def __init__(self, entry: Entry) -> None:
        super().__init__(name=entry.name, help=entry.summary)
        self.entry = entry


def build(entry: Entry) -> Any:
    """Import the entry's module and build its command exactly as typer would have at registration."""
    module, _, attribute = entry.target.partition(":")
    found = getattr(importlib.import_module(module), attribute)
    holder = typer.Typer()
    if isinstance(found, typer.Typer):
        holder.add_typer(found, name=entry.name)
    else:
        holder.command(entry.name)(found)
    return typer.main.get_group(holder).commands[entry.name]


class LazyGroup(TyperGroup):
    """The root group: ``COMMANDS`` stand in as summaries until one is resolved."""

    entries: ClassVar[tuple[Entry, ...]] = COMMANDS

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for entry in self.entries:
            self.commands.setdefault(entry.name, Summary(entry))

    def load(self, name: str) -> None:
        """Replace the summary named ``name`` (if it is one) by its real command."""
        current = self.commands.get(name)
        if isinstance(current, Summary):
            self.commands[name] = build(current.entry)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        # Running a command, its --help and completing its options all resolve it first.
        if args:
            self.load(args[0])
        return super().resolve_command(ctx, args)
