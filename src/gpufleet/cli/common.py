"""What every command shares: the consoles, and turning user mistakes into exit code 2."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console

from gpufleet.errors import InputError

console = Console()
err_console = Console(stderr=True)

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
