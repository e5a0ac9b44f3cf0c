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


def export(ledger: Ledger, out: Path, fmt: str, kind: str = "Allocation") -> int:
    """Write every current record of ``kind`` to ``out`` atomically; return the row count."""
    if fmt not in FORMATS:
        raise InputError.one(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}", path="--format")
    if out.is_dir():
        raise InputError.one("is a folder; give the file to write, e.g. allocations.csv", file=str(out), path="--out")
    records = ledger.allocations() if kind == "Allocation" else ledger.waits()
    frame = pl.DataFrame([_flat(r) for r in records], infer_schema_length=None)
    with atomic_path(out) as tmp:
        if fmt == "csv":
            frame.write_csv(tmp)
        else:
            frame.write_parquet(tmp)
    return frame.height
