"""Durations for people: the two largest units, rounded to the smaller, ``45 s``, ``12 min 05 s``,
``5 h 07 min``, ``3 d 21 h``.

Every human-facing output (terminal tables, sentences, the HTML report) prints a duration through
``human``; JSON keeps seconds, so a script never parses this text.
"""

from __future__ import annotations

import math


def human(seconds: float | None, *, missing: str = "–") -> str:
    """``seconds`` as a person reads it; ``missing`` for None, NaN or infinity (no value to show).

    Each level rounds to its smaller unit first and only then picks the level, so a value just below
    a boundary carries over it (3599.6 s is ``1 h``, never ``60 min``).
    """
    if seconds is None or not math.isfinite(seconds):
        return missing
    total = abs(seconds)
    secs = round(total)
    sign = "-" if seconds < 0 and secs else ""  # -0.3 s reads "0 s", not "-0 s"
    if secs < 60:
        return f"{sign}{secs} s"
    if secs < 3_600:
        return sign + _pair(*divmod(secs, 60), "min", "s")
    mins = round(total / 60)
    if mins < 1_440:
        return sign + _pair(*divmod(mins, 60), "h", "min")
    return sign + _pair(*divmod(round(total / 3_600), 24), "d", "h")


def _pair(big: int, small: int, big_unit: str, small_unit: str) -> str:
    if not small:
        return f"{big} {big_unit}"
    return (
        f"{big} {big_unit} {small:02d} {small_unit}" if small_unit != "h" else f"{big} {big_unit} {small} {small_unit}"
    )


__all__ = ["human"]
