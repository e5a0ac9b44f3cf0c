"""Before → after, with its uncertainty said in words.

A pool's change is in utilization (percentage points); a team's in average busy GPUs (busy GPU-hours
over window hours), so windows of different lengths compare. The interval is the worst case the
coverage allows: the after figure's low bound minus the before figure's high bound, and the other
way round. Only when the whole interval lies on one side of zero is the direction stated as measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.evidence.coverage import Cell

UP = "up"
DOWN = "down"
UNCLEAR = "unclear"
NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Change:
    pool: str
    team: str | None
    figure: str
    unit: str
    delta: float | None
    low: float | None
    high: float | None
    verdict: str
    statement: str

    def as_dict(self) -> dict[str, object]:
        return {
            "pool": self.pool,
            "team": self.team,
            "figure": self.figure,
            "unit": self.unit,
            "delta": self.delta,
            "low": self.low,
            "high": self.high,
            "verdict": self.verdict,
            "statement": self.statement,
        }


def per_hour(cell: Cell, hours: float) -> Cell:
    """GPU-hours over a window → average GPUs (bounds scale alike)."""
    if not cell.measured or hours <= 0:
        return cell
    assert cell.value is not None
    return Cell(
        unit="GPUs",
        value=cell.value / hours,
        low=None if cell.low is None else cell.low / hours,
        high=None if cell.high is None else cell.high / hours,
        coverage=cell.coverage,
        source=cell.source,
    )


def compare(pool: str, team: str | None, *, figure: str, unit: str, before: Cell, after: Cell) -> Change:
    for name, cell in (("before", before), ("after", after)):
        if not cell.measured:
            return Change(
                pool, team, figure, unit, None, None, None, NOT_MEASURED, f"not measured: {name} is {cell.reason}"
            )
    assert before.value is not None and after.value is not None
    assert before.low is not None and before.high is not None and after.low is not None and after.high is not None
    delta = after.value - before.value
    low, high = after.low - before.high, after.high - before.low
    span = f"{_signed(delta)} {unit}"
    if low == high:
        words = "every slot of both windows was sampled"
    else:
        words = (
            f"between {_signed(low)} and {_signed(high)} {unit} if the unsampled device-time "
            "had been anywhere from idle to fully busy"
        )
    if low > 0:
        verdict = UP
    elif high < 0:
        verdict = DOWN
    else:
        verdict = UNCLEAR
        words += "; the direction is not established"
    return Change(pool, team, figure, unit, delta, low, high, verdict, f"{span} ({words})")


def _signed(value: float) -> str:
    return f"{value:+.2f}"
