"""The twin's memo of flavor-assignment and preemption verdicts changes no outcome.

Differential property test: random streams of arrivals, completions and finished evictions on the
Kueue objects `gpufleet render` writes for the bundled example (fair sharing, three teams, a
cohort, four flavors) run through two twins: the real one, and one without the memo
(``fast=False``). Every cycle must give the same admissions, preemptions and verdicts, message for message.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.policy import load_policy, resolve
from gpufleet.simulate.queue import cluster_spec
from gpufleet.twin import Twin
from gpufleet.twin.apis.specs import ClusterSpec, PodSetSpec, WorkloadSpec
from tests.support import EXAMPLES

SPEC = cluster_spec(resolve(load_policy(EXAMPLES / "fleet.yaml")))
ASKS = [
    ("nvidia.com/gpu", 1),
    ("nvidia.com/gpu", 2),
    ("nvidia.com/gpu", 8),
    ("nvidia.com/mig-1g.10gb", 1),
    ("nvidia.com/mig-3g.40gb", 1),
    ("nvidia.com/gpu.shared", 1),
]
TEAMS = ["research", "nlp", "vision"]
PRIORITIES = [10, 100, 1000]


@dataclass(frozen=True)
class Arrive:
    team: int
    ask: int
    pods: int
    priority: int


@dataclass(frozen=True)
class Finish:
    pick: int


@dataclass(frozen=True)
class Gone:
    pick: int


events = st.lists(
    st.one_of(
        st.builds(Arrive, st.integers(0, 2), st.integers(0, len(ASKS) - 1), st.integers(1, 3), st.integers(0, 2)),
        st.builds(Finish, st.integers(0, 1000)),
        st.builds(Gone, st.integers(0, 1000)),
    ),
    min_size=10,
    max_size=80,
)


def play(twin: Twin, stream: list[Any]) -> list[tuple[Any, ...]]:
    log: list[tuple[Any, ...]] = []
    for t, event in enumerate(stream):
        if isinstance(event, Arrive):
            team = TEAMS[event.team]
            resource, per_pod = ASKS[event.ask]
            pod_sets = (PodSetSpec("main", event.pods, ((resource, per_pod),)),)
            twin.add_workload(
                WorkloadSpec(team, f"w{t}", team, pod_sets, priority=PRIORITIES[event.priority], created=t, uid=f"w{t}")
            )
        else:
            admitted = sorted(
                k for k, w in twin.workloads.items() if w.admission is not None and w.evicted == isinstance(event, Gone)
            )
            if not admitted:
                continue
            key = admitted[event.pick % len(admitted)]
            if isinstance(event, Gone):
                twin.evicted_gone(key)
            else:
                twin.finish(key)
        for result in twin.run(None):
            log.append((result.admitted, result.preempted, result.pending))
    return log


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events)
def test_the_memo_changes_no_cycle(stream: list[Any]) -> None:
    remembering = Twin(SPEC, hold_evicted_quota=True)
    forgetful = Twin(SPEC, hold_evicted_quota=True, fast=False)
    assert play(remembering, stream) == play(forgetful, stream)


def outcome(twin: Twin, stream: list[Any]) -> tuple[Any, ...]:
    """What a caller sees when cycle boundaries do not matter: admissions, evictions and verdicts
    in order, the cycle count, and every pending workload's last verdict."""
    log = play(twin, stream)
    admitted = [a for cycle in log for a in cycle[0]]
    preempted = [p for cycle in log for p in cycle[1]]
    verdicts = [p for cycle in log for p in cycle[2]]
    return admitted, preempted, verdicts, twin.cycle, twin.pending()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events)
def test_batching_inert_cycles_changes_no_outcome(stream: list[Any]) -> None:
    """A streak of quiet cycles run as one call admits, evicts and gives verdicts exactly as
    cycle-by-cycle does, and stops at the same cycle (the simulator batches; `gpufleet twin step`
    does not). Quiet cycles include those whose preemptor waits for victims already evicted."""
    batched = Twin(SPEC, hold_evicted_quota=True, streaks=True)
    single = Twin(SPEC, hold_evicted_quota=True)
    assert outcome(batched, stream) == outcome(single, stream)


def seeded_stream(rng: random.Random, length: tuple[int, int], arrive: float, finish: float) -> list[Any]:
    """An arrival with probability ``arrive``, a completion up to ``finish``, else a finished eviction."""
    stream: list[Any] = []
    for _ in range(rng.randint(*length)):
        roll = rng.random()
        if roll < arrive:
            stream.append(Arrive(rng.randint(0, 2), rng.randrange(len(ASKS)), rng.randint(1, 3), rng.randint(0, 2)))
        elif roll < finish:
            stream.append(Finish(rng.randint(0, 1000)))
        else:
            stream.append(Gone(rng.randint(0, 1000)))
    return stream


def assert_batching_changes_nothing(spec: ClusterSpec, stream: list[Any]) -> None:
    batched = Twin(spec, hold_evicted_quota=True, streaks=True)
    single = Twin(spec, hold_evicted_quota=True)
    assert outcome(batched, stream) == outcome(single, stream)


@pytest.mark.parametrize("seed", range(4))
def test_batching_changes_no_outcome_on_long_streams(seed: int) -> None:
    """The same comparison on 50 seeded long streams each: hypothesis favours short ones, while
    streaks where the set of waiting preemptors changes need many arrivals and preemptions."""
    rng = random.Random(seed)
    for _ in range(50):
        assert_batching_changes_nothing(SPEC, seeded_stream(rng, (20, 80), arrive=0.6, finish=0.8))


def variant(*, fair: bool, reclaim: str, strict: str | None) -> ClusterSpec:
    """The example with another ordering, reclaim policy, or one StrictFIFO queue. Without
    ``reclaimWithinCohort: Any`` a queue that cannot preempt holds its nominal share back."""
    queues = {
        name: replace(
            cq,
            preemption=replace(cq.preemption, reclaim_within_cohort=reclaim),
            queueing_strategy="StrictFIFO" if name == strict else cq.queueing_strategy,
        )
        for name, cq in SPEC.cluster_queues.items()
    }
    return replace(SPEC, cluster_queues=queues, config=replace(SPEC.config, fair_sharing=fair))


@pytest.mark.parametrize(
    "spec",
    [
        SPEC,
        variant(fair=False, reclaim="LowerPriority", strict=None),
        variant(fair=True, reclaim="Never", strict="nlp"),
    ],
    ids=["example", "classical-reclaim-lower", "fair-reclaim-never-strict"],
)
def test_batching_changes_no_outcome_with_backlogs(spec: ClusterSpec) -> None:
    """After a completion, a BestEffortFIFO queue sends its whole backlog round again, one head a
    cycle; the batched twin runs those cycles in bulk (``_rotate``). Same outcome, verdict for
    verdict, on 40 seeded streams per configuration, including queues that hold quota back and
    a StrictFIFO queue whose head stays."""
    rng = random.Random(7)
    for _ in range(40):  # mostly arrivals: backlogs that every completion sends round again
        assert_batching_changes_nothing(spec, seeded_stream(rng, (100, 250), arrive=0.7, finish=0.9))
