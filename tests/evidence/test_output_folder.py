"""``gpufleet evidence`` on a real Prometheus: --json answers, its own earlier folder replaced, --force
keeping a foreign one (the shared rule of gpufleet.outputs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.outputs import KEPT_SUFFIX, MARKER
from tests.evidence.evidence_scenario import LivePrometheus

runner = CliRunner()


def _args(prometheus: LivePrometheus, out: Path, *extra: str) -> list[str]:
    w = prometheus.windows
    return [
        "evidence",
        "--prometheus",
        prometheus.url,
        "--before",
        w.before,
        "--after",
        w.after,
        "-o",
        str(out),
        *extra,
    ]


@pytest.mark.xdist_group("prometheus")
def test_json_is_the_written_document_and_a_rerun_replaces_its_own_folder(
    prometheus: LivePrometheus, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    first = runner.invoke(app, _args(prometheus, out, "--json"))
    assert first.exit_code == 0, first.output
    answer = json.loads(first.stdout)
    written = json.loads((out / "evidence.json").read_text())
    assert {k: v for k, v in answer.items() if k not in ("output", "files")} == written
    assert answer["files"] == [
        str(out / n) for n in ("evidence.json", "utilization-before.png", "utilization-after.png", "evidence.html")
    ]
    assert json.loads((out / MARKER).read_text())["command"] == "evidence"
    again = runner.invoke(app, _args(prometheus, out))
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.xdist_group("prometheus")
def test_force_keeps_the_foreign_folder(prometheus: LivePrometheus, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.md").write_text("my notes")
    refused = runner.invoke(app, _args(prometheus, out))
    assert refused.exit_code == 2
    assert (out / "notes.md").read_text() == "my notes" and len(list(out.iterdir())) == 1
    forced = runner.invoke(app, _args(prometheus, out, "--force"))
    assert forced.exit_code == 0, forced.output
    assert (tmp_path / f"out{KEPT_SUFFIX}" / "notes.md").read_text() == "my notes"
    assert (out / "evidence.json").exists() and not (out / "notes.md").exists()
