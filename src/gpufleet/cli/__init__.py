"""The ``gpufleet`` command line: parsing and printing only, one core call per command.

Each command group lives in its own module and is registered here. ``main`` owns the exit codes:
0 success or intact, 1 a finding (denied, tampered, invalid), 2 unusable input (a user mistake, a
usage error), 70 a crash (a bug: the traceback goes to a file, or to stderr with GPUFLEET_DEBUG=1),
130 interrupted, 141 the reader of stdout went away (a closed pipe).
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Sequence

import typer
from typer import rich_utils

from gpufleet import __version__
from gpufleet.cli import check, demo, evidence, policy, scan, trace
from gpufleet.cli import forecast as forecast_cli
from gpufleet.cli import simulate as simulate_cli
from gpufleet.cli import tune as tune_cli
from gpufleet.cli import twin as twin_cli
from gpufleet.cli import whatif as whatif_cli
from gpufleet.cli import why as why_cli
from gpufleet.cli.audit import audit_app, record
from gpufleet.cli.common import err_console, error_document
from gpufleet.errors import Problem

EXIT_CRASH = 70  # EX_SOFTWARE (sysexits.h): never 1, which means a finding
EXIT_INTERRUPTED = 130
EXIT_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe
DEBUG_ENV = "GPUFLEET_DEBUG"

app = typer.Typer(
    name="gpufleet",
    help="A queue in front of the card: plan, render, simulate and audit a shared GPU fleet with Kueue.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


app.add_typer(twin_cli.app, name="twin")
app.add_typer(trace.app, name="trace")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    _version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print gpufleet's version and exit."
    ),
) -> None:
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
tune_cli.register(app)
app.command()(simulate_cli.simulate)
app.add_typer(audit_app)
app.command()(record)
app.command("why")(why_cli.why)
app.command("what-if")(whatif_cli.whatif)
app.command("forecast")(forecast_cli.forecast)


def _crash(exc: Exception, as_json: bool) -> None:
    """A bug, not the user's mistake: a short message, the traceback kept in a file, exit 70."""
    text = traceback.format_exc()
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        sys.stderr.write(text)
        where = "printed above"
    else:
        try:
            fd, path = tempfile.mkstemp(prefix="gpufleet-crash-", suffix=".txt")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            where = f"in {path}"
        except OSError:
            where = "not kept (the temporary folder is not writable)"
    message = f"gpufleet crashed: {type(exc).__name__}: {exc}"
    hint = f"This is a bug in gpufleet, not a mistake in your input. The traceback is {where}"
    hint += "." if where == "printed above" else f"; set {DEBUG_ENV}=1 to print it."
    if as_json:
        typer.echo(error_document(f"{message}. {hint}", []))
    err_console.print(f"[bold red]{message}[/]", markup=True, highlight=False, soft_wrap=True)
    err_console.print(hint, markup=False, highlight=False, soft_wrap=True)
    sys.exit(EXIT_CRASH)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line; every way out of it is one of the exit codes above."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    try:
        code = app(args=args, prog_name="gpufleet", standalone_mode=False)
    except typer.Abort:
        err_console.print("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except typer.TyperException as exc:  # usage errors (click's, as typer ships it): exit 2
        code = getattr(exc, "exit_code", 2)
        if as_json:
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            typer.echo(error_document(message, [Problem(message)]))
        else:
            rich_utils.rich_format_error(exc)  # type: ignore[arg-type]
        sys.exit(code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit as exc:
        # Outside standalone mode every deliberate exit comes back as a return value; click exits 1
        # by itself only when stdout's reader has gone (EPIPE), which is no finding.
        sys.exit(EXIT_PIPE if exc.code == 1 else exc.code)
    except Exception as exc:
        _crash(exc, as_json)
    sys.exit(code if isinstance(code, int) else 0)
