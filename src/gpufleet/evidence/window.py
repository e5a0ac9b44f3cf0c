"""The two windows a before/after comparison is made of, and the scrape-interval grid inside each.

A window ``FROM..TO`` is cut into slots one scrape interval long; a series covers a slot when it
has at least one sample in it. Coverage — the share of slots with data — is what the coverage rule
judges, so the grid has to be exact: slot ``k`` is ``[start + k·step, start + (k+1)·step)`` and the
window ends at the last whole slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

from gpufleet.errors import InputError

SEPARATOR = ".."
CLI = "command line"  # where option mistakes are located in error messages


@dataclass(frozen=True)
class Window:
    name: str  # "before" or "after"
    start: datetime
    end: datetime  # exclusive, start + slots × step
    step_s: int

    @property
    def slots(self) -> int:
        return int((self.end - self.start).total_seconds()) // self.step_s

    @property
    def hours(self) -> float:
        return self.slots * self.step_s / 3600

    @property
    def slot_hours(self) -> float:
        return self.step_s / 3600

    @property
    def seconds(self) -> int:
        return self.slots * self.step_s

    def slot_index(self, timestamps: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """Slot of each unix timestamp; -1 for those outside the window."""
        k = np.floor((timestamps - self.start.timestamp()) / self.step_s).astype(np.int64)
        k[(k < 0) | (k >= self.slots)] = -1
        return k

    def slot_times(self) -> list[datetime]:
        return [self.start + timedelta(seconds=k * self.step_s) for k in range(self.slots)]

    def label(self) -> str:
        return f"{_iso(self.start)}..{_iso(self.end)}"


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str, *, option: str) -> datetime:
    """ISO 8601; a time without an offset is read as UTC (and said so in the docs)."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InputError.one(
            f"{text!r} is not an ISO 8601 time such as 2026-11-01T00:00:00Z", file=CLI, path=option
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_window(name: str, text: str, *, step_s: int, now: datetime) -> Window:
    """``FROM..TO`` → a window of whole scrape intervals; empty, inverted or future windows are errors."""
    option = f"--{name}"
    if step_s <= 0:
        raise InputError.one(
            "the scrape interval must be a positive number of seconds", file=CLI, path="--scrape-interval"
        )
    if text.count(SEPARATOR) != 1:
        raise InputError.one(
            f"{text!r}: expected FROM..TO, e.g. 2026-11-01T00:00Z..2026-11-08T00:00Z", file=CLI, path=option
        )
    first, second = text.split(SEPARATOR)
    start, end = parse_time(first, option=option), parse_time(second, option=option)
    if end == start:
        raise InputError.one(f"{text!r} is empty: FROM and TO are the same time", file=CLI, path=option)
    if end < start:
        raise InputError.one(f"{text!r} is inverted: TO is before FROM", file=CLI, path=option)
    if end > now:
        raise InputError.one(
            f"{text!r} ends in the future (now is {_iso(now)}): nothing can be measured there",
            file=CLI,
            path=option,
        )
    whole = int((end - start).total_seconds()) // step_s
    if whole < 1:
        raise InputError.one(f"{text!r} is shorter than one scrape interval ({step_s} s)", file=CLI, path=option)
    return Window(name=name, start=start, end=start + timedelta(seconds=whole * step_s), step_s=step_s)


def check_order(before: Window, after: Window) -> None:
    """The comparison means 'before the change' vs 'after it': the windows must not overlap or swap."""
    if before.end > after.start:
        raise InputError.one(
            f"the before window ({before.label()}) must end no later than the after window starts ({after.label()})",
            file=CLI,
            path="--before",
        )
