"""One world's run, as every reader of it takes it: the outcome, its summary, ledger records and job rows.

Apart from ``run.py``, which makes it, because the readers that ``run`` calls (``measures``,
``pathologies``) take it too: the value sits below all three, so none imports in a circle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpufleet.ledger.records import Record
from gpufleet.simulate.outcome import Outcome


@dataclass(frozen=True)
class RunResult:
    name: str  # "queue" or "first-apply"
    outcome: Outcome
    summary: dict[str, Any]
    records: list[Record]
    rows: list[dict[str, Any]]
