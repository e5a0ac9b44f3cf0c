"""The native trace format: round trips and located errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.errors import InputError
from gpufleet.trace import Job, JobKind, read_trace, write_trace
from gpufleet.trace.native import COLUMNS

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), max_size=8)
name = text.filter(lambda s: s.strip() == s and s != "")


@st.composite
def jobs(draw: st.DrawFn) -> Job:
    share = draw(st.booleans())
    mig = "" if share else draw(st.sampled_from(["", "1g.10gb", "3g.40gb"]))
    return Job(
        job_id=draw(name),
        team=draw(name),
        namespace=draw(name),
        submit_s=draw(st.integers(0, 10**9)),
        duration_s=draw(st.integers(0, 10**7)),
        kind=draw(st.sampled_from(list(JobKind))),
        pods=draw(st.integers(1, 64)),
        gpus=0 if share else draw(st.integers(1 if mig else 0, 8)),
        gpu_milli=draw(st.integers(1, 999)) if share else 0,
        mig_profile=mig,
        gpu_models=tuple(draw(st.lists(name.filter(lambda s: "|" not in s), max_size=3))),
        cpu_milli=draw(st.integers(0, 10**6)),
        memory=draw(st.integers(0, 2**44)),
        priority_class=draw(text.map(str.strip)),
        model=draw(text.map(str.strip)),
        data_class=draw(text.map(str.strip)),
        checkpoint=draw(text.map(str.strip)),
        termination_grace_s=draw(st.integers(0, 3600)),
    )


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@settings(max_examples=25, deadline=None)
@given(batch=st.lists(jobs(), max_size=6))
def test_round_trip(tmp_path_factory: pytest.TempPathFactory, suffix: str, batch: list[Job]) -> None:
    path = tmp_path_factory.mktemp("t") / f"trace{suffix}"
    write_trace(batch, path)
    assert read_trace(path) == batch
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # the temporary file is gone


def test_header_lists_every_documented_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    write_trace([], path)
    assert path.read_text().strip().split(",") == list(COLUMNS)


HEADER = ",".join(COLUMNS)
GOOD = "j1,a,a,0,60,dev,1,1,0,1g.10gb,,2000,0,,,,"


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (
            [GOOD.replace(",60,", ",soon,")],
            [(2, 5, "duration_s", "duration_s: expected an integer, got 'soon'")],
        ),
        (
            [GOOD, GOOD.replace(",dev,", ",play,")],
            [(3, 6, "kind", "kind: expected training|batch-eval|dev|inference, got 'play'")],
        ),
        ([GOOD.replace("j1,a,a", "j1,,a")], [(2, 2, "team", "team is required")]),
        (
            [GOOD.replace(",1,1,0,1g.10gb,", ",1,1,300,1g.10gb,")],
            [(2, 1, "job_id", "gpu_milli is a share of one card (1..999) and excludes gpus and mig_profile")],
        ),
        (  # found by tests/fuzz: Parquet's Int64 cannot hold it, so `trace convert` crashed writing it
            [GOOD.replace("j1,a,a,0,", "j1,a,a,9223372036854775808,")],
            [(2, 4, "submit_s", "submit_s: '9223372036854775808' is beyond the 64-bit integer range")],
        ),
        (  # found by tests/fuzz: int() reads '1_000' as 1000 and Arabic-Indic digits as numbers
            [GOOD.replace(",60,", ",1_000,"), GOOD.replace(",60,", ",١٢,")],
            [
                (2, 5, "duration_s", "duration_s: expected an integer, got '1_000'"),
                (3, 5, "duration_s", "duration_s: expected an integer, got '١٢'"),
            ],
        ),
    ],
    ids=["bad-integer", "bad-kind-on-second-row", "missing-team", "share-with-mig", "beyond-int64", "not-ascii-digits"],
)
def test_bad_rows_name_file_row_and_column(
    tmp_path: Path, rows: list[str], expected: list[tuple[int, int, str, str]]
) -> None:
    path = tmp_path / "t.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    with pytest.raises(InputError) as caught:
        read_trace(path)
    got = [(p.line, p.column, p.path, p.message) for p in caught.value.problems]
    assert got == expected
    assert all(p.file == str(path) for p in caught.value.problems)


def test_unknown_format_and_columns_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"use \.csv or \.parquet"):
        read_trace(tmp_path / "t.json")
    path = tmp_path / "t.csv"
    path.write_text("job_id,team,submit_s,duration_s,kind,colour\nj,a,0,1,dev,red\n")
    with pytest.raises(InputError, match="unknown column 'colour'"):
        read_trace(path)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (  # found by tests/fuzz: polars renamed the second 'kind' to 'kind_duplicated_0' and called that unknown
            "job_id,team,submit_s,duration_s,kind,kind",
            [(1, None, "kind", "column 'kind' appears more than once")],
        ),
        ("job_id,team,submit_s,duration_s,kind,", [(1, 6, "", "a column without a name")]),
        ("job_id,submit_s,duration_s,kind", [(1, None, "team", "missing column 'team'")]),
    ],
    ids=["repeated-column", "unnamed-column", "missing-column"],
)
def test_header_mistakes_name_line_one_and_the_column(
    tmp_path: Path, header: str, expected: list[tuple[int, int | None, str, str]]
) -> None:
    path = tmp_path / "t.csv"
    path.write_text(header + "\n")
    with pytest.raises(InputError) as caught:
        read_trace(path)
    assert [(p.line, p.column, p.path, p.message) for p in caught.value.problems] == expected


def test_namespace_defaults_to_team(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,team,submit_s,duration_s,kind\nj,research,0,1,dev\n")
    (job,) = read_trace(path)
    assert (job.namespace, job.pods, job.gpus) == ("research", 1, 0)
    assert job.termination_grace_s == 30  # Kubernetes' default, for traces written before the column
