"""The coverage rule, and the one shape every figure takes: measured with its bounds, or not measured and why.

A figure is printed only when the series behind it cover at least ``min_coverage`` of the window at
the scrape interval. Below that the cell reads "not measured" with a machine reason and a sentence.
Thresholds are options; the rule is not, and no code path outside ``judge`` makes a number.

A measured figure carries bounds: the value it would take if the device-time without samples had been
anywhere from idle to fully busy. With full coverage the bounds equal the value.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

DEFAULT_MIN_COVERAGE = 0.9


class Reason(StrEnum):
    """Why a cell is not measured (machine reasons; the cell's message says it in words)."""

    NO_SERIES = "NoSeries"
    GAPS = "Gaps"
    MISSING_LABELS = "MissingLabels"
    TIME_SLICED = "TimeSlicedNoAttribution"
    NO_NODE_NAMES = "PoolNodesNotNamed"
    POLICY_MISMATCH = "MoreDevicesThanDeclared"
    NO_LEDGER = "NoLedger"
    NOT_MEASURED_INPUT = "DependsOnUnmeasured"


@dataclass(frozen=True)
class Cell:
    """One figure: a value with bounds and the coverage it rests on, or a reason it is absent."""

    unit: str
    value: float | None = None
    low: float | None = None
    high: float | None = None
    coverage: float | None = None
    reason: str = ""
    message: str = ""
    source: str = ""  # "declared" (policy), "dcgm", "kube-state-metrics", "ledger", "devices seen"

    @property
    def measured(self) -> bool:
        return self.value is not None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"unit": self.unit, "source": self.source}
        if self.measured:
            out |= {"value": self.value, "low": self.low, "high": self.high, "coverage": self.coverage}
        else:
            out |= {"value": None, "reason": self.reason, "message": self.message}
            if self.coverage is not None:
                out["coverage"] = self.coverage
        return out


def not_measured(unit: str, reason: Reason, message: str, *, coverage: float | None = None, source: str = "") -> Cell:
    return Cell(unit=unit, reason=reason.value, message=message, coverage=coverage, source=source)


def declared(unit: str, value: float, source: str = "declared") -> Cell:
    """A figure that is not measured but stated (the policy's capacity): no coverage applies."""
    return Cell(unit=unit, value=value, low=value, high=value, source=source)


def judge(
    unit: str, value: float, *, coverage: float, min_coverage: float, missing: float, what: str, source: str
) -> Cell:
    """Apply the coverage rule: the value and its bounds ``[value, value + missing]``, or "not measured"."""
    if coverage + 1e-12 < min_coverage:
        return not_measured(
            unit,
            Reason.GAPS,
            f"{what} cover {coverage:.1%} of the window at the scrape interval (needs {min_coverage:.0%})",
            coverage=coverage,
            source=source,
        )
    return Cell(unit=unit, value=value, low=value, high=value + missing, coverage=coverage, source=source)


def ratio(unit: str, top: Cell, bottom: Cell, *, scale: float = 100.0) -> Cell:
    """``top / bottom`` (a utilization), with bounds from the numerator's; unmeasured if either is."""
    for part in (top, bottom):
        if not part.measured:
            return Cell(unit=unit, reason=part.reason, message=part.message, coverage=part.coverage, source=part.source)
    assert top.value is not None and bottom.value is not None and top.low is not None and top.high is not None
    if bottom.value <= 0:
        return not_measured(unit, Reason.NOT_MEASURED_INPUT, "the denominator is zero", source=top.source)
    return Cell(
        unit=unit,
        value=top.value / bottom.value * scale,
        low=top.low / bottom.value * scale,
        high=min(top.high / bottom.value * scale, scale),
        coverage=top.coverage,
        source=top.source,
    )
