"""gpufleet's own trace format: one row per job, CSV or Parquet (chosen by the file suffix).

The columns are documented in docs/traces.md. Reading checks every cell and reports each bad one
as a Problem naming the file, the row (the CSV line, or the 1-based Parquet row), and the column;
writing is atomic (a temporary file beside the target, then a rename).
"""

from __future__ import annotations

import csv
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from gpufleet.errors import InputError, Problem
from gpufleet.files import atomic_path
from gpufleet.trace.job import DEFAULT_TERMINATION_GRACE_S, Job, JobKind, job_problems

if TYPE_CHECKING:  # polars loads with the first trace read or written, not with every command
    import polars as pl

COLUMNS = tuple(f.name for f in fields(Job))
REQUIRED = ("job_id", "team", "submit_s", "duration_s", "kind")
INT_COLUMNS = ("submit_s", "duration_s", "pods", "gpus", "gpu_milli", "cpu_milli", "memory", "termination_grace_s")
# An empty integer cell (or a trace without the column) is 0, but for these
INT_DEFAULTS = {"pods": 1, "termination_grace_s": DEFAULT_TERMINATION_GRACE_S}
MODEL_SEPARATOR = "|"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise InputError.one(f"unknown trace format {suffix!r}: use .csv or .parquet", file=str(path))
    return suffix


def _frame(jobs: Iterable[Job]) -> pl.DataFrame:
    import polars as pl

    rows = list(jobs)
    data: dict[str, list[object]] = {}
    for name in COLUMNS:
        values = [getattr(j, name) for j in rows]
        if name == "gpu_models":
            values = [MODEL_SEPARATOR.join(v) for v in values]
        elif name == "kind":
            values = [str(v) for v in values]
        data[name] = values
    schema = {name: (pl.Int64 if name in INT_COLUMNS else pl.String) for name in COLUMNS}
    return pl.DataFrame(data, schema=schema)


def write_trace(jobs: Iterable[Job], path: Path) -> None:
    """Write the jobs to ``path`` (.csv or .parquet) atomically."""
    suffix = _suffix(path)
    frame = _frame(jobs)
    with atomic_path(path, suffix) as tmp:
        if suffix == ".csv":
            frame.write_csv(tmp)
        else:
            frame.write_parquet(tmp)


def read_trace(path: Path) -> list[Job]:
    """Read a native trace; every bad cell or row becomes one located Problem."""
    import polars as pl

    suffix = _suffix(path)
    if not path.is_file():
        raise InputError.one(f"no such trace file: {path}", file=str(path))
    try:
        if suffix == ".csv":
            frame = pl.read_csv(path, infer_schema_length=0)
        else:
            frame = pl.read_parquet(path)
            frame = frame.with_columns(pl.all().cast(pl.String))
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError.one(f"not a readable {suffix[1:]} trace: {exc}", file=str(path)) from exc
    header = _csv_header(path) if suffix == ".csv" else list(frame.columns)
    header_line = 1 if suffix == ".csv" else None
    repeated = sorted({c for c in header if header.count(c) > 1})
    missing = [c for c in REQUIRED if c not in header]
    unknown = [c for c in dict.fromkeys(header) if c not in COLUMNS]
    problems = [Problem(f"column {c!r} appears more than once", str(path), c, header_line) for c in repeated]
    problems += [Problem(f"missing column {c!r}", str(path), c, header_line) for c in missing]
    problems += [
        Problem(
            f"unknown column {c!r} (known: {', '.join(COLUMNS)})" if c else "a column without a name",
            str(path),
            c,
            header_line,
            header.index(c) + 1,
        )
        for c in unknown
    ]
    if problems:
        raise InputError(problems)
    first_line = 2 if suffix == ".csv" else 1  # a CSV's header is line 1
    columns = {c: frame[c].to_list() for c in frame.columns}
    jobs: list[Job] = []
    for row in range(frame.height):
        line = row + first_line
        job = _job(columns, row, functools.partial(_problem, path, frame, line=line), problems)
        if job is not None:
            jobs.append(job)
    if problems:
        raise InputError(problems)
    return jobs


def _shown(cell: str) -> str:
    return repr(cell if len(cell) <= 40 else cell[:37] + "...")


def _csv_header(path: Path) -> list[str]:
    """The header as written: polars renames a repeated column (``kind_duplicated_0``), hiding the mistake."""
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError.one(f"not a readable csv trace: {exc}", file=str(path)) from None


def _problem(path: Path, frame: pl.DataFrame, message: str, column: str, line: int) -> Problem:
    index = frame.columns.index(column) + 1 if column in frame.columns else None
    return Problem(message, str(path), column, line, index)


def _job(
    columns: dict[str, list[str | None]],
    row: int,
    locate: Callable[[str, str], Problem],
    problems: list[Problem],
) -> Job | None:
    """One row as a Job, or None after appending its problems."""
    before = len(problems)
    values: dict[str, object] = {}
    for name in COLUMNS:
        cell = (columns[name][row] or "").strip() if name in columns else ""
        if name in INT_COLUMNS:
            if not cell:
                if name in REQUIRED:
                    problems.append(locate(f"{name} is required", name))
                values[name] = INT_DEFAULTS.get(name, 0)
                continue
            if not _INTEGER.fullmatch(cell):  # int() would also take '1_000' and '١٢'
                problems.append(locate(f"{name}: expected an integer, got {_shown(cell)}", name))
            elif len(cell) > 20 or not INT64_MIN <= int(cell) <= INT64_MAX:  # what Parquet's Int64 holds
                problems.append(locate(f"{name}: {_shown(cell)} is beyond the 64-bit integer range", name))
            else:
                values[name] = int(cell)
        elif name == "kind":
            try:
                values[name] = JobKind(cell)
            except ValueError:
                known = "|".join(k.value for k in JobKind)
                problems.append(locate(f"kind: expected {known}, got {cell!r}", name))
        elif name == "gpu_models":
            values[name] = tuple(m for m in cell.split(MODEL_SEPARATOR) if m)
        else:
            if not cell and name in REQUIRED:
                problems.append(locate(f"{name} is required", name))
            values[name] = cell
    if len(problems) > before:
        return None
    if not values["namespace"]:
        values["namespace"] = values["team"]
    draft = Job.__new__(Job)
    for name, value in values.items():
        object.__setattr__(draft, name, value)
    broken = job_problems(draft)
    if broken:
        problems.extend(locate(message, "job_id") for message in broken)
        return None
    return Job(**values)  # type: ignore[arg-type]
