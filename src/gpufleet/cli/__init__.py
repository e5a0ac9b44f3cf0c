"""The ``gpufleet`` command line: parsing and printing only, one core call per command.

Each command group lives in its own module and is registered here.
"""

from __future__ import annotations

import typer

from gpufleet import __version__
from gpufleet.cli import check, demo, evidence, policy, scan, trace
from gpufleet.cli import simulate as simulate_cli
from gpufleet.cli import twin as twin_cli
from gpufleet.cli.audit import audit_app, record

app = typer.Typer(
    name="gpufleet",
    help="A queue in front of the card: plan, render, simulate and audit a shared GPU fleet with Kueue.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


app.add_typer(twin_cli.app, name="twin")
app.add_typer(trace.app, name="trace")


@app.callback()
def _root() -> None:
    """gpufleet: a queue in front of the card."""


@app.command()
def version() -> None:
    """Print gpufleet's version."""
    typer.echo(__version__)


policy.register(app)
evidence.register(app)
check.register(app)
scan.register(app)
demo.register(app)
app.command()(simulate_cli.simulate)
app.add_typer(audit_app)
app.command()(record)


def main() -> None:
    app()
