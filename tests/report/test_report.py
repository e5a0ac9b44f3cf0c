"""The report: files written from a results document, and report.html rendered by a real browser."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import matplotlib.image
import polars as pl
import pytest

from gpufleet.report.html import dur
from gpufleet.simulate.config import Mode, ServingCurve, SimulationConfig
from gpufleet.simulate.run import compare, results_document, write_outputs
from tests.simulate.fleets import TWO_TEAMS, fleet, job

WIDTH, HEIGHT = 1200, 1800


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    f = fleet(TWO_TEAMS)
    jobs = [job("j1", "a", 0, 3600, gpus=2), job("j2", "b", 600, 1800), job("j3", "a", 700, 600)]
    config = SimulationConfig(serving=ServingCurve(hourly=(1.0,) * 24))
    results = compare(f, jobs, config, [Mode.FIRST_APPLY, Mode.QUEUE])
    write_outputs(out, results_document(f, "three jobs", len(jobs), results), results)
    return out


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "–"), (0, "0 s"), (59, "59 s"), (600, "10 min"), (5400, "1 h 30 min"), (3 * 86400, "3 d")],
    ids=["none", "zero", "seconds", "minutes", "hours", "days"],
)
def test_waits_read_in_the_unit_a_person_would_use(seconds: int | None, text: str) -> None:
    assert dur(seconds) == text


def test_every_file_is_written(written: Path) -> None:
    for name in ("results.json", "allocations.jsonl", "jobs.csv", "jobs.parquet", "report.html"):
        assert (written / name).stat().st_size > 0, name
    charts = sorted(p.name for p in (written / "charts").iterdir())
    assert charts == ["queue-length.png", "share-vs-weight.png", "utilization.png", "waits-per-team.png"]
    for chart in (written / "charts").iterdir():
        assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_job_table_has_one_row_per_job_and_run(written: Path) -> None:
    csv = pl.read_csv(written / "jobs.csv")
    parquet = pl.read_parquet(written / "jobs.parquet")
    assert csv.height == parquet.height == 6
    assert sorted(set(csv["run"].to_list())) == ["first-apply", "queue"]
    queue = parquet.filter(pl.col("run") == "queue").sort("job_id")
    assert queue["preemptions"].to_list() == [1, 0, 0]


def test_report_html_is_self_contained(written: Path) -> None:
    html = (written / "report.html").read_text()
    assert "data:image/png;base64," in html
    assert 'src="http' not in html and "<script" not in html


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("headless Chromium is not installed (.ci/setup.d/chromium.sh installs Debian's chromium)")
    return found


def _run_chromium(*args: str) -> subprocess.CompletedProcess[str]:
    base = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
    return subprocess.run([*base, *args], capture_output=True, text=True, timeout=120, check=True)


def test_chromium_renders_the_report(written: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    url = (written / "report.html").resolve().as_uri()
    _run_chromium(f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", url)
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    # Not blank: a rendered page has text, tables and charts, so many distinct colours and
    # a good share of non-white pixels.
    rgb = (pixels[..., :3] * 255).astype(int)
    colours = {tuple(c) for c in rgb.reshape(-1, 3)[::37]}
    assert len(colours) > 50
    assert (rgb.sum(axis=2) < 700).mean() > 0.03

    dom = _run_chromium("--dump-dom", url).stdout
    for text in (
        "Before: first apply (no queue)",
        "After: Kueue in front of the cards",
        'id="run-first-apply"',
        'id="run-queue"',
    ):
        assert text in dom
    for team in ('<td class="name">a</td>', '<td class="name">b</td>'):
        assert team in dom
    assert dom.count("<img") == 4
    # Only the queue run preempted: its most preempted job is listed, with who and why.
    assert 'id="preempted-queue"' in dom and 'id="preempted-first-apply"' not in dom
    assert "a/j1: 1× by b 1 (InCohortReclamation 1)" in dom


def test_the_report_leads_with_the_headline_and_the_measures(written: Path) -> None:
    """The measures and the one-sentence headline come before the older figures; the numbers are the
    document's own (TWO_TEAMS, both worlds over [0, 5400]: first apply 2.7 GPU-h of goodput)."""
    html = (written / "report.html").read_text()
    headline, measures, older = (
        html.index('id="headline"'),
        html.index('id="measures"'),
        html.index("The older figures"),
    )
    assert headline < measures < older
    assert "Simulated: over the first 1 h 30 min, Kueue finishes" in html
    assert "against 2.7 (" in html and ") under first apply (no queue)," in html
    assert "<h1>Before and after the queue (simulated)</h1>" in html
    assert "held idle GPU-h (bound to jobs not running)" in html


def test_the_report_names_each_finding_with_its_remedy(tmp_path: Path) -> None:
    """j1 is reclaimed four times by b's short jobs: the queue world shows a PreemptionLoop, with the
    chain, the remedy and the settings it touches."""
    f = fleet(TWO_TEAMS)
    jobs = [job("j1", "a", 0, 36_000, gpus=2)] + [job(f"b{i}", "b", 600 + 2000 * i, 300) for i in range(4)]
    config = SimulationConfig(serving=ServingCurve(hourly=(1.0,) * 24))
    results = compare(f, jobs, config, [Mode.FIRST_APPLY, Mode.QUEUE])
    write_outputs(tmp_path / "out", results_document(f, "a loop", len(jobs), results), results)
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'id="finding-queue-PreemptionLoop"' in html
    assert "a/j1 (a, batch): preempted 4× by b 4× (InCohortReclamation)" in html
    assert "<code>queueing.reclaimWithinCohort</code>" in html
    assert 'id="finding-first-apply-' not in html
