"""Native traces (``trace show|convert``, ``simulate``): CSV and Parquet files, fuzzed cell by cell.

Property: a trace reads into jobs, or raises an InputError whose every problem names the file and,
for a bad cell, its row and column. What reads must also write and read back unchanged in both
formats (``trace convert``), so a value the reader lets through cannot crash the writer.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpufleet.errors import InputError
from gpufleet.trace import load_spec, read_trace, write_trace
from gpufleet.trace.native import COLUMNS, REQUIRED
from tests.fuzz.strategies import mutated, yaml_text
from tests.fuzz.tally import ran

GOOD = {
    "job_id": "j1",
    "team": "research",
    "namespace": "",
    "submit_s": "0",
    "duration_s": "60",
    "kind": "training",
    "pods": "1",
    "gpus": "2",
    "gpu_milli": "",
    "mig_profile": "",
    "gpu_models": "H100|A100",
    "cpu_milli": "4000",
    "memory": "1073741824",
    "priority_class": "",
    "model": "",
    "data_class": "",
    "checkpoint": "",
}
CELLS = st.one_of(
    st.sampled_from(["", " ", "0", "1", "-1", "999", "1000", "2", "training", "dev", "1g.10gb", "H100|", "|"]),
    st.sampled_from([str(2**63), str(-(2**63) - 1), str(10**30), "1_000", "١٢", "1e3", "0x10", " 7 ", "+5"]),
    st.integers().map(str),
    st.text(max_size=10),
)
HEADERS = st.lists(st.sampled_from([*COLUMNS, *REQUIRED, *REQUIRED, "extra", "Job_ID", ""]), max_size=12)


@st.composite
def trace_rows(draw: st.DrawFn) -> tuple[list[str], list[list[str]]]:
    """A header (usually the required columns and some optional ones) and a few rows near a good job."""
    if draw(st.integers(0, 4)) == 0:
        header = draw(HEADERS)
    else:
        optional = draw(st.lists(st.sampled_from([c for c in COLUMNS if c not in REQUIRED]), max_size=6, unique=True))
        header = [*REQUIRED, *optional]
        header = draw(st.permutations(header))
    rows = []
    for _ in range(draw(st.integers(0, 4))):
        row = [GOOD.get(c, "") if draw(st.integers(0, 2)) else draw(CELLS) for c in header]
        if draw(st.integers(0, 9)) == 0:
            row = row[: draw(st.integers(0, len(row)))] + draw(st.lists(CELLS, max_size=2))  # ragged
        rows.append(row)
    return list(header), rows


def _csv_text(header: list[str], rows: list[list[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


CSV_TEXTS = st.one_of(
    trace_rows().map(lambda hr: _csv_text(*hr)),
    st.text(max_size=120),
    trace_rows().map(lambda hr: _csv_text(*hr)).flatmap(lambda t: st.integers(0, len(t)).map(lambda n: t[:n])),
)

DTYPES: list[Any] = [pl.Int64, pl.Int8, pl.UInt64, pl.Float64, pl.Boolean, pl.String, pl.Binary, pl.Null, pl.Date]


@st.composite
def parquet_frames(draw: st.DrawFn) -> pl.DataFrame:
    """Columns of every Parquet type a trace might carry: integers, floats, text, bytes, lists, structs."""
    header, rows = draw(trace_rows())
    header = list(dict.fromkeys(h for h in header if h))  # Parquet needs distinct, non-empty names
    height = len(rows)
    data: dict[str, pl.Series] = {}
    for name in header:
        kind = draw(
            st.sampled_from(["text", "text", "text", "int", "float", "bool", "bytes", "list", "struct", "null"])
        )
        cells = [GOOD.get(name, "") if draw(st.booleans()) else draw(CELLS) for _ in range(height)]
        if kind == "text":
            data[name] = pl.Series(name, cells, dtype=pl.String)
        elif kind == "int":
            data[name] = pl.Series(name, [draw(st.integers(-(2**63), 2**63 - 1)) for _ in cells], dtype=pl.Int64)
        elif kind == "float":
            data[name] = pl.Series(name, [draw(st.floats()) for _ in cells], dtype=pl.Float64)
        elif kind == "bool":
            data[name] = pl.Series(name, [draw(st.booleans()) for _ in cells], dtype=pl.Boolean)
        elif kind == "bytes":
            data[name] = pl.Series(name, [draw(st.binary(max_size=6)) for _ in cells], dtype=pl.Binary)
        elif kind == "list":
            data[name] = pl.Series(name, [[c] for c in cells], dtype=pl.List(pl.String))
        elif kind == "struct":
            data[name] = pl.Series(name, [{"v": c} for c in cells], dtype=pl.Struct({"v": pl.String}))
        else:
            data[name] = pl.Series(name, [None] * height, dtype=pl.Null)
    return pl.DataFrame(list(data.values())) if data else pl.DataFrame()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("traces")


def assert_reads_or_explains(path: Path, folder: Path) -> str:
    try:
        jobs = read_trace(path)
    except InputError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.file == str(path), problem
            assert problem.message, problem
            if problem.message.startswith("not a readable"):
                continue  # the file as a whole
            assert problem.path in (*COLUMNS, *_header(path)), problem  # the column, by name
            if path.suffix == ".csv":
                assert problem.line is not None, problem  # the header's line, or the cell's
        return "refused"
    for suffix in (".csv", ".parquet"):
        again = folder / f"again{suffix}"
        write_trace(jobs, again)
        assert read_trace(again) == jobs
    return "read and written back"


def _header(path: Path) -> list[str]:
    if path.suffix == ".csv":
        return next(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))), [])
    return list(pl.read_parquet_schema(path))


@settings(settings.get_profile("gpufleet-fuzz"))
@given(text=CSV_TEXTS)
@example(text="job_id,team,submit_s,duration_s,kind\nj,t,9223372036854775808,1,dev\n")
@example(text="job_id,team,submit_s,duration_s,kind\nj,t,1_0,1,dev\n")
@example(text="job_id,team,submit_s,duration_s,kind\nj,t,١٢,1,dev\n")
@example(text="job_id,team,submit_s,duration_s,kind,kind\nj,t,1,1,dev,dev\n")
@example(text="job_id,team,submit_s,duration_s,kind\n")
@example(text="")
def test_a_csv_trace_reads_or_every_bad_cell_is_located(folder: Path, text: str) -> None:
    path = folder / "fuzz.csv"
    path.write_text(text, encoding="utf-8")
    ran("traces (CSV)", assert_reads_or_explains(path, folder))


@pytest.mark.slow
@settings(settings.get_profile("gpufleet-fuzz"))
@given(frame=parquet_frames())
def test_a_parquet_trace_reads_or_every_bad_cell_is_located(folder: Path, frame: pl.DataFrame) -> None:
    path = folder / "fuzz.parquet"
    frame.write_parquet(path)
    ran("traces (Parquet)", assert_reads_or_explains(path, folder))


SPEC: dict[str, Any] = {  # the example of docs/traces.md
    "days": 7,
    "load": 0.8,
    "floodShare": 0.4,
    "teams": [
        {"name": "research", "namespace": "research", "weight": 2, "priorityClasses": ["train-high", "batch"],
         "dataClasses": ["internal", "confidential"], "models": ["meta-llama/Llama-3.1-8B"],
         "checkpoints": ["s3://eu-central-1/research/"]},
        {"name": "product", "weight": 1, "priorityClasses": ["batch"], "dataClasses": ["internal"]},
        {"name": "interns", "weight": 1, "flood": True},
    ],
    "pools": [
        {"name": "h100-train", "gpu": "H100-SXM5-80GB", "gpus": 16},
        {"name": "a100-mig", "gpu": "A100-SXM4-80GB", "gpus": 8, "slicing": "mig", "migProfiles": ["3g.40gb"]},
        {"name": "l40s-dev", "gpu": "L40S", "gpus": 8, "slicing": "timeslice", "replicas": 4},
    ],
}  # fmt: skip


@settings(settings.get_profile("gpufleet-fuzz"))
@given(text=st.one_of(mutated(SPEC).flatmap(yaml_text), yaml_text(SPEC)))
def test_a_synth_spec_loads_or_every_problem_is_located(folder: Path, text: str) -> None:
    path = folder / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_spec(path)
    except InputError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.file == str(path), problem
            assert problem.line is not None, problem
        ran("trace synth specs", "refused")
        return
    ran("trace synth specs", "loaded")
