"""User mistakes end in a clear message and exit 2, and nothing is written."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from tests.evidence.evidence_scenario import LivePrometheus

runner = CliRunner()
POLICY = Path(__file__).with_name("fleet.yaml")
pytestmark = pytest.mark.xdist_group("prometheus")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


def _past(hours_ago: int, hours: int) -> str:
    end = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=hours_ago)
    start = end - timedelta(hours=hours)
    return f"{start.isoformat()}..{end.isoformat()}"


def _invoke(tmp_path: Path, url: str, before: str, after: str, *extra: str) -> tuple[int, str, Path]:
    out = tmp_path / "out"
    args = ["evidence", "--prometheus", url, "--before", before, "--after", after, "-o", str(out), *extra]
    result = runner.invoke(app, args)
    return result.exit_code, _flat(result.output), out


def _flat(output: str) -> str:
    """The messages with rich's line wrapping undone (long temporary paths wrap at any width)."""
    return " ".join(output.split())


BEFORE, AFTER = _past(5, 2), _past(1, 2)
T = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("before", "after", "message"),
    [
        (f"{T}..{T}", AFTER, "is empty"),
        ("2026-01-02T00:00:00Z..2026-01-01T00:00:00Z", AFTER, "is inverted"),
        (BEFORE, f"{datetime.now(UTC).isoformat()}..{(datetime.now(UTC) + timedelta(hours=1)).isoformat()}", "future"),
        ("2026-01-01T00:00:00Z..2026-01-01T00:00:10Z", AFTER, "shorter than one scrape interval"),
        ("yesterday..today", AFTER, "not an ISO 8601 time"),
        ("2026-01-01T00:00:00Z", AFTER, "expected FROM..TO"),
        (AFTER, BEFORE, "must end no later than the after window starts"),
    ],
    ids=["empty", "inverted", "future", "too-short", "not-a-time", "no-separator", "swapped"],
)
def test_bad_windows_are_refused_before_any_query(tmp_path: Path, before: str, after: str, message: str) -> None:
    code, output, out = _invoke(tmp_path, f"http://127.0.0.1:{_closed_port()}", before, after)
    assert code == 2, output
    assert message in output
    assert not out.exists()


def test_an_unreachable_prometheus_is_a_clear_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    code, output, out = _invoke(tmp_path, url, BEFORE, AFTER)
    assert code == 2
    assert "cannot reach Prometheus" in output and url in output
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "hint"),
    [((), "pass --token"), (("--token", "wrong"), "check --token")],
    ids=["no-token", "bad-token"],
)
def test_refused_credentials_are_a_clear_error(
    guarded_prometheus: str, tmp_path: Path, extra: tuple[str, ...], hint: str
) -> None:
    code, output, out = _invoke(tmp_path, guarded_prometheus, BEFORE, AFTER, *extra)
    assert code == 2
    assert "HTTP 401" in output and hint in output
    assert not out.exists()


def test_a_url_that_is_not_the_api_base_is_a_clear_error(prometheus: LivePrometheus, tmp_path: Path) -> None:
    w = prometheus.windows
    code, output, out = _invoke(tmp_path, f"{prometheus.url}/graph", w.before, w.after)
    assert code == 2
    assert "not JSON" in output and "base URL" in output
    assert not out.exists()


def test_an_unknown_pool_is_named_with_the_known_ones(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"  # refused before any query: the policy knows its pools
    code, output, out = _invoke(tmp_path, url, BEFORE, AFTER, "--policy", str(POLICY), "--pool", "h100")
    assert code == 2
    assert "unknown pool 'h100'" in output and "train, mig, dev" in output
    assert not out.exists()


def test_a_missing_ca_file_is_a_clear_error(tmp_path: Path) -> None:
    url = f"https://127.0.0.1:{_closed_port()}"
    code, output, out = _invoke(tmp_path, url, BEFORE, AFTER, "--ca-file", str(tmp_path / "nope.pem"))
    assert code == 2
    assert "cannot load the CA bundle" in output
    assert not out.exists()


def test_a_failed_run_leaves_the_previous_output_alone(prometheus: LivePrometheus, tmp_path: Path) -> None:
    w = prometheus.windows
    code, _, out = _invoke(tmp_path, prometheus.url, w.before, w.after, "--policy", str(POLICY))
    assert code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, _, _ = _invoke(tmp_path, f"http://127.0.0.1:{_closed_port()}", w.before, w.after)
    assert code == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary folder left behind


@pytest.mark.parametrize("kind", ["file", "foreign-folder"])
def test_an_output_path_that_is_not_a_report_is_never_replaced(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out"
    if kind == "file":
        target.write_text("keep me")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("keep me")
    args = ["evidence", "--prometheus", f"http://127.0.0.1:{_closed_port()}", "--before", BEFORE, "--after", AFTER]
    result = runner.invoke(app, [*args, "-o", str(target)])
    assert result.exit_code == 2
    said = _flat(result.output)
    assert ("not a folder (a regular file)" if kind == "file" else "a folder gpufleet did not write") in said
    assert (target.read_text() if kind == "file" else (target / "notes.txt").read_text()) == "keep me"
