"""What every command shares: the consoles, and turning user mistakes into exit code 2."""

from __future__ import annotations

import functools
import shutil
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console

from gpufleet.errors import InputError

# Piped output (CI logs, `| less`) gets a readable width instead of rich's 80-column fallback.
_WIDTH = None if sys.stdout.isatty() else max(shutil.get_terminal_size((140, 24)).columns, 140)
console = Console(width=_WIDTH)
err_console = Console(stderr=True, width=_WIDTH)

P = ParamSpec("P")
R = TypeVar("R")

EXIT_INPUT = 2


def guarded(func: Callable[P, R]) -> Callable[P, R]:
    """Print every problem of an ``InputError`` and exit 2: a user mistake never shows a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except InputError as exc:
            count = len(exc.problems)
            err_console.print(f"[bold red]error:[/] {count} problem{'s' if count != 1 else ''} found")
            for problem in exc.problems:
                err_console.print(f"  {problem}", markup=False, highlight=False)
            raise typer.Exit(EXIT_INPUT) from None

    return wrapper
