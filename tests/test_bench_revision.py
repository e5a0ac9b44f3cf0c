"""``bench/_revision.py``: a benchmark as of another commit, for same-machine ratios.

Runs the real ``git archive`` of this checkout and the real benchmark in a child process; skips
where the checkout has no git history (a tarball, not a clone).
"""

from __future__ import annotations

import subprocess

import pytest

from bench._revision import ISSUE_18_BASELINE, ROOT, RevisionError, figure, run_at


def _head() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (FileNotFoundError, subprocess.CalledProcessError):
        pytest.skip(f"{ROOT} is not a git checkout with history: --against needs one")


def _status() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_a_revision_runs_its_own_benchmark_and_leaves_the_checkout_alone() -> None:
    head = _head()
    status = _status()
    output = run_at(head, "twin_scale", ["--workloads", "300"])
    rate = figure(output, r"([\d,]+) workloads admitted per CPU-second", "admissions per CPU-second", head)
    assert "admissions 300," in output
    assert rate > 0
    assert _status() == status  # read, never changed: nothing extracted into the checkout


def test_the_baseline_runs_as_it_was() -> None:
    _head()
    known = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{ISSUE_18_BASELINE}^{{commit}}"], capture_output=True, check=False
    )
    if known.returncode != 0:
        pytest.skip(f"{ISSUE_18_BASELINE} is not in this checkout's history (a shallow clone?)")
    output = run_at(ISSUE_18_BASELINE, "twin_scale", ["--workloads", "300"])
    assert "admissions 300," in output
    assert "before:" not in output  # its benchmark predates printing issue 18's figure beside its own


@pytest.mark.parametrize(
    ("rev", "name", "says"),
    [
        ("no-such-revision", "twin_scale", "git archive no-such-revision"),
        ("HEAD", "no_such_benchmark", "benchmark no_such_benchmark as of HEAD exited with 2"),
    ],
)
def test_what_cannot_run_is_named(rev: str, name: str, says: str) -> None:
    _head()
    with pytest.raises(RevisionError, match=says):
        run_at(rev, name, [])


def test_an_output_without_the_figure_is_named() -> None:
    with pytest.raises(RevisionError, match="no admissions per CPU-second"):
        figure("nothing here\n", r"([\d,]+) workloads admitted", "admissions per CPU-second", "abc123")
