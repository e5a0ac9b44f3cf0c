"""The scheduler's round: a job's pods share one shape and bind in order."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.first_apply import FirstApplyWorld
from gpufleet.simulate.jobs import JobRun
from tests.simulate.fleets import TWO_NODES, fleet, job


class MixedPods(FirstApplyWorld):
    """The first apply, with a job's first pod asking one card less than its sibling."""

    def enter(self, t: int, run: JobRun) -> None:
        super().enter(t, run)
        first = replace(run.pods[0], gpus=run.pods[0].gpus - 1)
        self.set_pods(run, [first, *run.pods[1:]])


def test_pods_of_one_attempt_share_one_shape_id_and_bind_as_a_prefix() -> None:
    """Two 2×2 gangs on two 2-card nodes: the first binds both pods, the second none, and its pods
    get the first's shape id."""
    jobs = [job("g1", "a", 0, 600, gpus=2, pods=2), job("g2", "a", 0, 600, gpus=2, pods=2)]
    sim = FirstApplyWorld(fleet(TWO_NODES), jobs, SimulationConfig(mode=Mode.FIRST_APPLY, until_s=10))
    sim.run()
    first, second = sim.runs
    assert first.shape_id is not None and first.shape_id == second.shape_id
    assert first.placed == 2 and len(first.bound) == 2
    assert second.placed == 0 and not second.bound


@pytest.mark.pure  # MixedPods subclasses the compiled FirstApplyWorld
def test_pods_that_differ_in_more_than_their_names_are_refused() -> None:
    sim = MixedPods(fleet(TWO_NODES), [job("m", "a", 0, 600, gpus=2, pods=2)], SimulationConfig(mode=Mode.FIRST_APPLY))
    with pytest.raises(ValueError, match="differ in more than their names"):
        sim.run()
