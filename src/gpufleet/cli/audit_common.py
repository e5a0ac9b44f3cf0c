"""What the ``audit`` commands share: the ``--ledger`` option, read-only opening, and exit codes.

Exit codes are a contract for scripts: 0 intact or success, 1 a finding (tampered, inconsistent,
a bad signature), 2 unusable input (a missing, foreign or unreachable ledger, a malformed file).
A crash is a bug, not a finding: it goes on to ``gpufleet.cli.main``, which exits 70 (never 1), so a
script never mistakes a bug for tampering.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import click
import typer

from gpufleet.cli.common import console
from gpufleet.errors import InputError

if TYPE_CHECKING:
    from gpufleet.ledger.store import Ledger
    from gpufleet.ledger.verification import LedgerVerdict

DEFAULT_LEDGER = "gpufleet-ledger.db"
LEDGER_HELP = "SQLite file path or database URL (postgresql://user@host/db)."
FLEET_LEDGER_HELP = (
    "SQLite file path or database URL, or NAME=URL naming its cluster; repeat for each worker's ledger of a federation."
)
EXIT_FINDING = 1

P = ParamSpec("P")
R = TypeVar("R")


def open_read(ledger: str) -> Ledger:
    """An existing ledger, read-only; a missing or foreign one is an InputError naming it."""
    from gpufleet.ledger.store import Ledger

    return Ledger.read(ledger)


def workload_name(workload: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` as the audit commands take a workload, or exit 2 saying what was expected."""
    namespace, sep, name = workload.partition("/")
    if not sep or not namespace or not name:
        raise InputError.one(f"expected NAMESPACE/NAME, got {workload!r}", path="WORKLOAD")
    return namespace, name


def audited(func: Callable[P, R]) -> Callable[P, R]:
    """Database errors become exit 2 naming the ledger; any other exception is a crash for ``main`` (exit 70)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (InputError, typer.Exit, typer.Abort, click.exceptions.Exit, click.ClickException, KeyboardInterrupt):
            raise
        except Exception as exc:
            if type(exc).__module__.startswith(("sqlalchemy", "psycopg", "sqlite3")):
                orig = getattr(exc, "orig", None) or exc
                raise InputError.one(f"cannot read the ledger: {str(orig).strip()}", path="--ledger") from None
            raise

    return wrapper


def print_verdict(verdict: LedgerVerdict, *, quiet_ok: bool, indent: str = "") -> None:
    """The first chain finding, or every derived-table problem, or (unless ``quiet_ok``) OK."""
    finding = verdict.chain.finding
    if finding is not None:
        console.print(
            f"{indent}[bold red]TAMPERED[/]: entry {finding.seq} ({finding.record_key}): {finding.kind.value} — "
            f"{finding.message}. {verdict.chain.entries} entries before it are intact.",
            highlight=False,
            soft_wrap=True,
        )
        return
    for problem in verdict.problems:
        console.print(
            f"{indent}[bold red]PROBLEM[/]: {problem.reason} — {problem.message}", highlight=False, soft_wrap=True
        )
    if verdict.ok and not quiet_ok:
        console.print(
            f"{indent}OK: {verdict.chain.entries} entries intact, derived tables match; chain head {verdict.chain.head};"
            f" Merkle root {base64.b64encode(verdict.root).decode()}",
            highlight=False,
            soft_wrap=True,
        )
