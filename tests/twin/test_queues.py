"""A ClusterQueue's pending side: ``peek`` names what ``pop`` would return and changes nothing.

The bulk rotation of quiet cycles (``cycle._rotate``) peeks at every queue each cycle and pops
only the heads it parks, so a peek must never alter the order later pops see. Property test:
random operation sequences run on two queues, one of which peeks before every operation.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.twin.queues import ClusterQueueQueue
from gpufleet.twin.specs import BEST_EFFORT_FIFO, STRICT_FIFO, PodSetSpec, WorkloadSpec
from gpufleet.twin.workload import Workload

POD_SETS = (PodSetSpec("main", 1, (("nvidia.com/gpu", 1),)),)


def workloads() -> list[Workload]:
    """Eight workloads; priorities and timestamps collide so the tie-breaker matters."""
    return [
        Workload(WorkloadSpec("ns", f"w{i}", "q", POD_SETS, priority=i % 3, created=i % 4, uid=f"w{i}"), "cq")
        for i in range(8)
    ]


ops = st.lists(
    st.tuples(
        st.sampled_from(["push", "park", "pop", "requeue", "requeue-now", "requeue-preempting", "flush", "delete"]),
        st.integers(0, 7),
    ),
    max_size=60,
)


def play(
    queue: ClusterQueueQueue, pool: list[Workload], steps: list[tuple[str, int]], peek: bool
) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []
    for op, i in steps:
        if peek:
            seen.append(("peek", queue.peek()))
        wl = pool[i]
        if op == "push":
            queue.push(wl)
        elif op == "park":
            queue.park(wl)
        elif op == "pop":
            popped = queue.pop()
            seen.append(("pop", popped))
            if peek:
                assert popped is seen[-2][1], "pop returned another workload than peek named"
        elif op.startswith("requeue"):
            seen.append(("requeue", queue.requeue(wl, immediate=op != "requeue", preempting=op.endswith("preempting"))))
        elif op == "flush":
            queue.flush_inadmissible()
        else:
            queue.delete(wl.key)
    seen.append(("left", sorted(queue.active), sorted(queue.inadmissible)))
    while (left := queue.pop()) is not None:
        seen.append(("drain", left))
    return [s for s in seen if s[0] != "peek"]


@settings(max_examples=300)
@given(ops, st.sampled_from([BEST_EFFORT_FIFO, STRICT_FIFO]))
def test_peek_names_the_next_pop_and_changes_nothing(steps: list[tuple[str, int]], strategy: str) -> None:
    pool = workloads()
    peeking = ClusterQueueQueue("cq", strategy, set())
    plain = ClusterQueueQueue("cq", strategy, set())
    assert play(peeking, pool, steps, peek=True) == play(plain, pool, steps, peek=False)


def test_peek_prefers_the_waiting_preemptor() -> None:
    """A preemptor requeued while waiting for its victims is popped first, ahead of older work."""
    pool = workloads()
    old, preemptor = pool[2], pool[3]  # priority 2 before priority 0
    queue = ClusterQueueQueue("cq", BEST_EFFORT_FIFO, set())
    queue.push(old)
    queue.requeue(preemptor, immediate=True, preempting=True)
    assert queue.peek() is preemptor
    assert queue.pop() is preemptor
    assert queue.peek() is old
