"""The policy's waitForPodsReady timeout is the one the queue world evicts by."""

from __future__ import annotations

import pytest

from gpufleet.simulate.config import Mode, PlacementPolicy, PodsReady, SimulationConfig, for_policy
from gpufleet.simulate.run import simulate
from tests.simulate.fleets import MIG_SPREAD, fleet, job

HOURS_3 = 3 * 3600


TEN_MINUTES = [600, 1260, 1980, 2820, 3900, 5460, 7980]
THIRTY_MINUTES = [1800, 3660, 5580, 7620, 9900]


@pytest.mark.parametrize(
    ("queueing", "evicted", "timeout_s"),
    [
        # 30 min after each admission; backoff 60, 120, 240, 480 s
        ("", THIRTY_MINUTES, 1800),
        # 10 min after each admission; backoff 60 · 2^(n-1) s, then 3,600 s, past the three hours
        ("queueing: {waitForPodsReady: {timeoutSeconds: 600}}\n", TEN_MINUTES, 600),
        ("queueing: {waitForPodsReady: {timeoutSeconds: 1800}}\n", THIRTY_MINUTES, 1800),
    ],
    ids=["kueue-default", "ten-minutes", "thirty-minutes-said"],
)
def test_an_unplaceable_job_is_evicted_by_the_policys_timeout(
    queueing: str, evicted: list[int], timeout_s: int
) -> None:
    """MIG_SPREAD: one 3g.40gb per node, quota 2; a pod asking two is admitted and never placed."""
    f = fleet(MIG_SPREAD + queueing)
    config = SimulationConfig(until_s=HOURS_3)
    assert for_policy(config, f.policy).pods_ready.timeout_s == timeout_s
    result = simulate(f, [job("m", "a", 0, 600, gpus=2, mig="3g.40gb")], config)
    (run,) = result.outcome.runs
    assert run.requeues == len(evicted)
    ended = [(a.ended, a.end_detail) for a in run.attempts if a.end_reason == "Evicted"]
    assert ended == [(t, "PodsReadyTimeout") for t in evicted]


def test_without_a_timeout_in_the_policy_the_configuration_is_unchanged() -> None:
    """A configuration that names its placement (as ``simulate --placement`` does) keeps it too."""
    config = SimulationConfig(
        mode=Mode.QUEUE, placement=PlacementPolicy.MOST_ALLOCATED, pods_ready=PodsReady(timeout_s=42)
    )
    assert for_policy(config, fleet(MIG_SPREAD).policy) is config
