"""Kueue's clocks in the simulator: parked workloads wake one requeue batch (1 s) after the
capacity change that frees them, so an active head takes the quota first (issue 18, seed 150)."""

from __future__ import annotations

import pytest

from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.run import simulate
from tests.simulate.fleets import FLAT, SERVING_AT_RISK, fleet, job

# SERVING_AT_RISK: team a has 2 cards of quota on a two-card training node.
# j1 holds both cards until 110; j2 (2 cards) arrives at 10 and is parked (no quota);
# j3 (1 card) arrives at 110, the instant j1 finishes.
JOBS = [job("j1", "a", 0, 110, gpus=2), job("j2", "a", 10, 600, gpus=2), job("j3", "a", 110, 600, gpus=1)]


@pytest.mark.parametrize(
    ("clocks", "reserved"),
    [
        # Kueue: j1's end asks for a requeue batch one second later; j3, in the heap, is admitted at
        # once; j2 wakes at 111, does not fit, is parked again, and wakes one batch after j3's end.
        (True, {"a/j1": [0], "a/j3": [110], "a/j2": [711]}),
        # without the clocks j2 (older) is back in the heap before j3's first cycle and goes first
        (False, {"a/j1": [0], "a/j2": [110], "a/j3": [710]}),
    ],
)
def test_a_parked_workload_wakes_one_requeue_batch_after_the_quota_frees(
    clocks: bool, reserved: dict[str, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    if not clocks:
        import gpufleet.simulate.queue as queue

        real = queue.Twin
        monkeypatch.setattr(queue, "Twin", lambda spec, **kw: real(spec, **{**kw, "clocks": None}))
    result = simulate(fleet(SERVING_AT_RISK), JOBS, SimulationConfig(mode=Mode.QUEUE, serving=FLAT))
    got = {r.key: [a.reserved for a in r.attempts if a.reserved is not None] for r in result.outcome.runs}
    assert got == reserved
