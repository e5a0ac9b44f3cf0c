"""Writers that open one new SQLite ledger at the same moment queue instead of failing.

Found with two recorder replicas starting together on the testbed: the migration ran in a deferred
transaction, and SQLite refuses at once (no busy wait) a read transaction that turns into a write
while another process writes. Real processes, because the lock is per process and file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import gpufleet
from gpufleet.ledger.store import Ledger

OPEN = "import sys\nfrom gpufleet.ledger.store import Ledger\nLedger.open(sys.argv[1]).close()\n"


@pytest.mark.parametrize("round_", range(4))
def test_writers_opening_a_new_sqlite_ledger_together_all_succeed(tmp_path: Path, round_: int) -> None:
    ledger = tmp_path / f"ledger-{round_}.db"
    src = str(Path(gpufleet.__file__).resolve().parents[1])
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN, str(ledger)],
            stderr=subprocess.PIPE,
            text=True,
            env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"},
        )
        for _ in range(3)
    ]
    failures = [err for p in writers if (err := p.communicate(timeout=120)[1]) and p.returncode != 0]
    assert failures == []
    with Ledger.read(str(ledger)) as opened:
        assert opened.positions() == {}
