"""``audit export``: the current view as a flat table (CSV or Parquet), one row per record key.

Nested fields are flattened to text a spreadsheet can filter on: placements as
``node:gpus[:device,device]`` joined by spaces, flavors as ``resource=flavor``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from gpufleet.errors import InputError
from gpufleet.files import atomic_path
from gpufleet.ledger.records import Allocation, WaitInterval, to_plain
from gpufleet.ledger.store import Ledger

FORMATS = ("csv", "parquet")


def _flat(record: Allocation | WaitInterval) -> dict[str, Any]:
    row = to_plain(record)
    row.pop("kind")
    if isinstance(record, Allocation):
        row["flavors"] = " ".join(f"{r}={f}" for r, f in record.flavors)
        row["placements"] = " ".join(
            f"{p.node}:{p.gpus}" + (f":{','.join(p.devices)}" if p.devices else "") for p in record.placements
        )
    return row


def check_target(out: Path, fmt: str) -> None:
    """Before any ledger is read: a format this writes, and a file (not a folder) to write."""
    if fmt not in FORMATS:
        raise InputError.one(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}", path="--format")
    if out.is_dir():
        raise InputError.one("is a folder; give the file to write, e.g. allocations.csv", file=str(out), path="--out")


def records(ledger: Ledger, kind: str) -> list[Allocation | WaitInterval]:
    """The current records of ``kind`` (Allocation or WaitInterval)."""
    return [*ledger.allocations()] if kind == "Allocation" else [*ledger.waits()]


def flat(record: Allocation | WaitInterval, cluster: str | None = None) -> dict[str, Any]:
    """One row; with ``cluster``, that cluster in the first column (a federation's export)."""
    return _flat(record) if cluster is None else {"cluster": cluster, **_flat(record)}


def export(ledger: Ledger, out: Path, fmt: str, kind: str = "Allocation") -> int:
    """Write every current record of ``kind`` to ``out`` atomically; return the row count."""
    check_target(out, fmt)
    return write(out, fmt, [_flat(r) for r in records(ledger, kind)])


def write(out: Path, fmt: str, rows: list[dict[str, Any]]) -> int:
    """``rows`` to ``out``, whole or not at all (a temporary file renamed over it); the row count."""
    frame = pl.DataFrame(rows, infer_schema_length=None)
    with atomic_path(out) as tmp:
        if fmt == "csv":
            frame.write_csv(tmp)
        else:
            frame.write_parquet(tmp)
    return frame.height
