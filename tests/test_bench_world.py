"""The world differential's bench refuses a trace the testbed cannot run before it starts anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_trace_compressed_past_the_testbed_s_pace_exits_2_naming_the_job(tmp_path: Path) -> None:
    """At 100x the small scenario's jobs last 2-5 s, under the pipeline's 10 s: refused, nothing started."""
    result = subprocess.run(
        [sys.executable, "-m", "bench", "world_differential", "--scenario", "small", "--factor", "100",
         "--work", str(tmp_path / "work")],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "scenario small: duration_s: job w016: runs 3 s, shorter than the 10 s" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "work").exists()
