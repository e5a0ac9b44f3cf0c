"""The same fuzzed inputs through the command line (typer's CliRunner on ``gpufleet.cli.app``).

Fewer examples than the in-process families (a tenth, at least 50): the loaders are the same, and
what is checked here is the edge: an exit code of 0, 1 or 2, never a traceback, and a refusal that
prints ``error:`` with the file's name.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from gpufleet.cli import app
from tests.fuzz.tally import fuzz_examples, ran

# the families' strategies (their modules' test functions are collected there, not here)
from tests.fuzz.test_check_manifests import streams
from tests.fuzz.test_policy_files import POLICY_TEXTS
from tests.fuzz.test_traces import CSV_TEXTS, parquet_frames
from tests.fuzz.test_twin_objects import object_streams
from tests.support import EXAMPLES

CLI = settings(settings.get_profile("gpufleet-fuzz"), max_examples=max(50, fuzz_examples() // 10))
runner = CliRunner()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli")


def assert_clean_exit(result: Result, file: Path, allowed: tuple[int, ...]) -> str:
    output = result.stdout + result.stderr
    assert result.exit_code in allowed, output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in output
    if result.exit_code == 2:
        assert "error:" in result.stderr
        assert str(file) in result.stderr
        return "exit 2"
    return f"exit {result.exit_code}"


@CLI
@given(text=POLICY_TEXTS)
def test_plan_exits_cleanly(folder: Path, text: str) -> None:
    path = folder / "fleet.yaml"
    path.write_text(text, encoding="utf-8")
    ran("CLI: plan", assert_clean_exit(runner.invoke(app, ["plan", str(path)]), path, (0, 2)))


@pytest.mark.slow
@CLI
@given(text=streams())
def test_check_exits_cleanly(folder: Path, text: str) -> None:
    path = folder / "manifests.yaml"
    path.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["check", str(EXAMPLES / "fleet.yaml"), str(path)])
    ran("CLI: check", assert_clean_exit(result, path, (0, 1, 2)))


@pytest.mark.slow
@CLI
@given(text=object_streams())
def test_twin_step_exits_cleanly(folder: Path, text: str) -> None:
    path = folder / "kueue.yaml"
    path.write_text(text, encoding="utf-8")
    ran("CLI: twin step", assert_clean_exit(runner.invoke(app, ["twin", "step", str(path)]), path, (0, 2)))


@CLI
@given(data=st.one_of(CSV_TEXTS, parquet_frames()))
def test_trace_convert_exits_cleanly(folder: Path, data: str | pl.DataFrame) -> None:
    if isinstance(data, str):
        path, out = folder / "trace.csv", folder / "out.parquet"
        path.write_text(data, encoding="utf-8")
    else:
        path, out = folder / "trace.parquet", folder / "out.csv"
        data.write_parquet(path)
    result = runner.invoke(app, ["trace", "convert", str(path), "-o", str(out)])
    ran("CLI: trace convert", assert_clean_exit(result, path, (0, 2)))
