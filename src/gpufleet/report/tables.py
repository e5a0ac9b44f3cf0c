"""The per-job table, as CSV (for people and spreadsheets) and Parquet (for dataframes)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from gpufleet.files import atomic_path


def job_frame(rows: Sequence[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), infer_schema_length=None) if rows else pl.DataFrame()


def write_table(rows: Sequence[dict[str, Any]], csv_path: Path, parquet_path: Path) -> None:
    frame = job_frame(rows)
    for path, write in ((csv_path, frame.write_csv), (parquet_path, frame.write_parquet)):
        with atomic_path(path) as tmp:
            write(tmp)
