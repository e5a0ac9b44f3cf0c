"""What every command shares: the consoles, tables that never cut a word, the output and --json
options, and turning user mistakes into exit code 2 (JSON under ``--json``)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpufleet.errors import InputError, Problem
from gpufleet.outputs import Target


def _width() -> int | None:
    """``COLUMNS`` when set; a terminal's own width; else (CI logs, ``| less``) at least 140 columns."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if sys.stdout.isatty() else max(shutil.get_terminal_size((140, 24)).columns, 140)


console = Console(width=_width())
err_console = Console(stderr=True, width=_width())

P = ParamSpec("P")
R = TypeVar("R")

EXIT_INPUT = 2

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON (errors too)")]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Write even over a folder gpufleet did not write; that folder is kept beside it as NAME.before-gpufleet",
    ),
]
# ``--out`` was the spelling before ``--output``; kept, hidden, so scripts keep working.
LegacyOut = Annotated[Path | None, typer.Option("--out", hidden=True, show_default=False)]


def output_option(help_text: str) -> Any:
    """``-o/--output`` with a command's own help text."""
    return typer.Option("-o", "--output", help=help_text)


def pick_output(output: Path | None, legacy: Path | None, default: Path | None = None) -> Path:
    """The output folder from ``-o/--output`` or the old ``--out``; both given must agree."""
    if output is not None and legacy is not None and output != legacy:
        raise InputError.one(f"-o/--output {output} and --out {legacy} disagree; give one", path="--output")
    chosen = output or legacy or default
    if chosen is None:
        raise InputError.one("missing option: pass -o/--output DIR", path="--output")
    return chosen


def table_width(table: Table, target: Console | None = None) -> int:
    """The narrowest ``table`` can be printed without cutting a word: rich may wrap a cell at its
    spaces, never inside a name or a time (nor at all in a ``no_wrap`` column)."""
    out = target or console
    for column in table.columns:
        # a no_wrap column (a duration such as "3 d 21 h", a quota) keeps each cell on one line
        sizes = [out.measure(cell) for cell in [column.header, *column.cells]]
        words = [m.maximum if column.no_wrap else m.minimum for m in sizes]
        column.min_width = max([column.min_width or 0, *words])
    return Measurement.get(out, out.options.update_width(1_000_000), table).minimum


def print_table(table: Table, target: Console | None = None) -> None:
    """Print ``table`` without cutting a word, in the terminal's width when it can be; when even
    that does not fit, the lines run longer than it (the terminal wraps them) instead of being
    cropped. The column widths are set here: rich's own shrinking can leave a table wider than
    the terminal once each column keeps its longest word, and then crops the right edge."""
    out = target or console
    needed = table_width(table, out)
    natural = Measurement.get(out, out.options.update_width(1_000_000), table).maximum
    if natural > out.width:
        _share_width(table, out, max(0, out.width - needed))
    width = out.width
    out.width = max(needed, width)  # rich never prints wider than its console: widen it for this table
    try:
        out.print(table, crop=False)
    finally:
        out.width = width


def _share_width(table: Table, out: Console, extra: int) -> None:
    """Fix each column's width: its longest word, plus a share of ``extra``. The columns that need
    the least to show every cell on one line get it first (ties: left to right), so short cells
    such as a decision or a quantity stay whole and only long prose wraps."""
    wants = []
    for column in table.columns:
        widest = max(out.measure(cell).maximum for cell in [column.header, *column.cells])
        wants.append(max(0, widest - (column.min_width or 0)))
    shares = [0] * len(wants)
    for i in sorted(range(len(wants)), key=lambda i: (wants[i], i)):
        shares[i] = min(wants[i], extra)
        extra -= shares[i]
    for column, share in zip(table.columns, shares, strict=True):
        column.width = (column.min_width or 0) + share


def problem_dict(p: Problem) -> dict[str, Any]:
    return {"file": p.file or None, "line": p.line, "column": p.column, "path": p.path or None, "message": p.message}


def error_document(message: str, problems: list[Problem]) -> str:
    """Under ``--json`` an error is one JSON object on stdout, like a result, and the exit code says which."""
    return json.dumps({"error": message, "problems": [problem_dict(p) for p in problems]}, indent=2)


def guarded(func: Callable[P, R]) -> Callable[P, R]:
    """Print every problem of an ``InputError`` and exit 2: a user mistake never shows a traceback.

    A command whose ``as_json`` argument is true gets the problems as one JSON object on stdout
    (``{"error": ..., "problems": [{file, line, column, path, message}]}``) instead.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except InputError as exc:
            count = len(exc.problems)
            headline = f"{count} problem{'s' if count != 1 else ''} found"
            if kwargs.get("as_json"):
                typer.echo(error_document(headline, exc.problems))
                raise typer.Exit(EXIT_INPUT) from None
            err_console.print(f"[bold red]error:[/] {headline}")
            for problem in exc.problems:
                err_console.print(f"  {problem}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_INPUT) from None

    return wrapper


def print_kept(target: Target) -> None:
    """Say where a forced run put the folder that was in the way."""
    if target.keep_as is not None:
        console.print(
            f"the folder that was at {target.path} is kept as {target.keep_as}", highlight=False, soft_wrap=True
        )


def counting_bar(description: str, *, quiet: bool = False) -> Progress:
    """A bar of done/total with elapsed time, on stderr so that stdout holds only the answer;
    ``quiet`` (under --json) shows nothing."""
    return Progress(
        TextColumn(description),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        disable=quiet,
    )
