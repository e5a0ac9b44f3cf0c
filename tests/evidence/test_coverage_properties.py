"""Properties of the grid, the coverage rule and the bounds, on generated series (no server needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.errors import InputError
from gpufleet.evidence.allocation import absent
from gpufleet.evidence.figures import BUSY, UTILIZATION, Settings, window_rows
from gpufleet.evidence.fleetmap import FleetMap, PoolView
from gpufleet.evidence.tracks import ENGINE, build
from gpufleet.evidence.window import Window, parse_window
from gpufleet.prom import Series

T0 = datetime(2026, 6, 1, tzinfo=UTC)
NOW = datetime(2026, 7, 1, tzinfo=UTC)
PROFILES = {"1g.10gb": 1, "2g.20gb": 2, "3g.40gb": 3, "7g.80gb": 7}


@settings(deadline=None)
@given(
    start_s=st.integers(0, 10**6),
    length_s=st.integers(1, 10**5),
    step_s=st.sampled_from([10, 15, 30, 60]),
)
def test_a_window_is_the_whole_slots_inside_from_to(start_s: int, length_s: int, step_s: int) -> None:
    start = T0 + timedelta(seconds=start_s)
    text = f"{start.isoformat()}..{(start + timedelta(seconds=length_s)).isoformat()}"
    if length_s < step_s:
        with pytest.raises(InputError, match="shorter than one scrape interval"):
            parse_window("before", text, step_s=step_s, now=NOW)
        return
    w = parse_window("before", text, step_s=step_s, now=NOW)
    assert w.slots * step_s <= length_s < (w.slots + 1) * step_s
    stamps = np.array([start.timestamp() + k * step_s + step_s / 2 for k in range(-1, w.slots + 1)])
    assert w.slot_index(stamps).tolist() == [-1, *range(w.slots), -1]


def _mig_pool() -> PoolView:
    return PoolView(
        name="p",
        mode="mig",
        nodes=frozenset({"n"}),
        model_label=None,
        capacity_gpus=None,
        compute_slices=7,
    )


devices = st.lists(
    st.tuples(
        st.sampled_from(sorted(PROFILES)),
        st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=40, max_size=40),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=150, deadline=None)
@given(devices=devices, fill=st.floats(0, 1), threshold=st.floats(0.05, 1.0))
def test_bounds_hold_whatever_the_unsampled_slots_were(
    devices: list[tuple[str, list[float | None]]], fill: float, threshold: float
) -> None:
    """Busy lies in [low, high] for any values of the missing samples; a figure appears iff coverage ≥ threshold."""
    window = Window("before", T0, T0 + timedelta(seconds=40 * 30), 30)
    series = []
    for i, (profile, values) in enumerate(devices):
        points = tuple((T0.timestamp() + k * 30, v) for k, v in enumerate(values) if v is not None)
        labels = {"Hostname": "n", "gpu": "0", "GPU_I_ID": str(i), "GPU_I_PROFILE": profile}
        series.append(Series(labels=labels, points=points))
    fmap = FleetMap(pools=(_mig_pool(),), teams={}, declared=False)
    tracks = build(window, fmap, {ENGINE: series})
    (row,) = window_rows(tracks, fmap, absent("none"), None, Settings(min_coverage=threshold))
    busy = row.cells[BUSY]
    weights = [PROFILES[p] / 7 for p, _ in devices]
    sampled = sum(w * sum(v is not None for v in vs) for w, (_, vs) in zip(weights, devices, strict=True))
    coverage = sampled / (sum(weights) * 40)
    assert busy.measured == (coverage + 1e-12 >= threshold)
    if not busy.measured:
        assert busy.reason == "Gaps" and row.cells[UTILIZATION].reason == "Gaps"
        return
    truth = sum(
        w * sum(fill if v is None else v for v in vs) * 30 / 3600 for w, (_, vs) in zip(weights, devices, strict=True)
    )
    assert busy.low is not None and busy.high is not None
    assert busy.low - 1e-9 <= truth <= busy.high + 1e-9
    assert busy.coverage == pytest.approx(coverage)
