"""Durations for people (gpufleet.durations.human): two units at most, never the wrong one."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.durations import human

UNIT_SECONDS = {"d": 86_400, "h": 3_600, "min": 60, "s": 1}


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "–"),
        (float("nan"), "–"),
        (float("inf"), "–"),
        (0, "0 s"),
        (45, "45 s"),
        (59.4, "59 s"),
        (59.6, "1 min"),
        (65, "1 min 05 s"),
        (725, "12 min 05 s"),
        (720, "12 min"),
        (3599.6, "1 h"),
        (18_545, "5 h 09 min"),
        (86_399.9, "1 d"),
        (90_000, "1 d 1 h"),
        (335_748, "3 d 21 h"),  # the "335748 s"
        (-90, "-1 min 30 s"),
    ],
)
def test_durations_read_as_a_person_says_them(seconds: float | None, text: str) -> None:
    assert human(seconds) == text


def _parse(text: str) -> tuple[float, str]:
    parts = re.fullmatch(r"(-?)(\d+) (d|h|min|s)(?: (\d+) (d|h|min|s))?", text)
    assert parts is not None, text
    sign, big, big_unit, small, small_unit = parts.groups()
    value = int(big) * UNIT_SECONDS[big_unit] + (int(small) * UNIT_SECONDS[small_unit] if small else 0)
    smallest = small_unit or {"d": "h", "h": "min", "min": "s", "s": "s"}[big_unit]
    return (-value if sign else value), smallest


@given(st.floats(min_value=-1e8, max_value=1e8, allow_nan=False))
def test_a_duration_is_its_value_to_half_its_smallest_unit(seconds: float) -> None:
    text = human(seconds)
    value, smallest = _parse(text)
    assert abs(value - seconds) <= UNIT_SECONDS[smallest] / 2 + 1e-6, text
    big = text.lstrip("-").split()
    assert int(big[0]) > 0 or text == "0 s"
    if len(big) == 4:  # the smaller unit never reaches the larger one's size
        assert int(big[2]) * UNIT_SECONDS[big[3]] < UNIT_SECONDS[big[1]]


@given(st.floats(min_value=0, max_value=1e8), st.floats(min_value=0, max_value=1e8))
def test_a_longer_wait_never_reads_shorter(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert _parse(human(low))[0] <= _parse(human(high))[0]
