"""A ClusterQueue's pending side: ``peek`` names what ``pop`` would return and changes nothing.

The bulk rotation of quiet cycles (``cycle._rotate``) peeks at every queue each cycle and pops
only the heads it parks, so a peek must never alter the order later pops see. Property test:
random operation sequences run on two queues, one of which peeks before every operation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpufleet.twin.apis.specs import BEST_EFFORT_FIFO, STRICT_FIFO, PodSetSpec, WorkloadSpec
from gpufleet.twin.queue.queues import ClusterQueueQueue
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


class ModelQueue:
    """What the queue must do, written the slow and obvious way: dictionaries and a sort."""

    def __init__(self, strict: bool, usage_of: Callable[[Workload], float] | None = None) -> None:
        self.strict = strict
        self.usage_of = usage_of  # AdmissionFairSharing: usage first, the sticky head only among the lowest
        self.active: dict[str, Workload] = {}
        self.inadmissible: dict[str, Workload] = {}
        self.bulk: set[int | None] = set()
        self.sticky: str | None = None

    def push(self, wl: Workload) -> None:
        if wl.key in self.active:
            return
        if wl.equivalence in self.bulk and not self.strict and wl.key not in self.inadmissible:
            self.inadmissible[wl.key] = wl
            return
        self.inadmissible.pop(wl.key, None)
        self.active[wl.key] = wl

    def park(self, wl: Workload) -> None:
        self.active.pop(wl.key, None)
        self.inadmissible[wl.key] = wl

    def pop(self) -> Workload | None:
        sticky, self.sticky = self.sticky, None
        usage = self.usage_of or (lambda w: 0.0)
        lowest = min((usage(w) for w in self.active.values()), default=0.0)
        if sticky is not None and sticky in self.active and usage(self.active[sticky]) <= lowest:
            return self.active.pop(sticky)
        if not self.active:
            return None
        wl = min(self.active.values(), key=lambda w: (usage(w), w.order))
        return self.active.pop(wl.key)

    def requeue(self, wl: Workload, *, immediate: bool, preempting: bool) -> bool:
        if not (immediate or self.strict):
            self.park(wl)
            return False
        self.inadmissible.pop(wl.key, None)
        self.active[wl.key] = wl
        if preempting and not self.strict:
            self.sticky = wl.key
        return True

    def bulk_move(self, head: Workload) -> None:
        if self.strict or head.equivalence is None:
            return
        self.bulk.add(head.equivalence)
        for wl in [w for w in self.active.values() if w.equivalence == head.equivalence]:
            self.park(wl)

    def flush(self) -> None:
        self.bulk.clear()
        self.active.update(self.inadmissible)
        self.inadmissible.clear()


def classed(count: int) -> list[Workload]:
    """Workloads in three equivalence classes, priorities and timestamps colliding."""
    pool = []
    for i in range(count):
        wl = Workload(WorkloadSpec("ns", f"w{i}", "q", POD_SETS, priority=i % 2, created=i % 5, uid=f"w{i:02}"), "cq")
        wl.equivalence = i % 3
        pool.append(wl)
    return pool


# Operations both property tests draw (pushes and pops twice as often); each adds its own.
COMMON_OPS = ["push", "push", "park", "pop", "pop", "requeue", "requeue-preempting", "flush", "bulk", "park-head"]
bulk_ops = st.lists(
    st.tuples(st.sampled_from([*COMMON_OPS, "requeue-now", "delete"]), st.integers(0, 11)),
    max_size=80,
)


def both(queue: ClusterQueueQueue, model: ModelQueue, op: str, wl: Workload) -> None:
    """One queue operation on the real queue and the model, with the same answer from each."""
    if op == "push":
        queue.push(wl)
        model.push(wl)
    elif op == "park":
        queue.park(wl)
        model.park(wl)
    elif op == "pop":
        assert queue.pop() is model.pop()
    elif op.startswith("requeue"):
        now, preempting = op != "requeue", op.endswith("preempting")
        assert queue.requeue(wl, immediate=now, preempting=preempting) == model.requeue(
            wl, immediate=now, preempting=preempting
        )
    elif op == "flush":
        queue.flush_inadmissible()
        model.flush()
    elif op == "park-head":  # a rotation's calm head (streaks._rotate): pop, park and bulk-move it
        head = queue.peek()
        if head is None:
            assert queue.pop() is model.pop() is None
        elif not queue.park_head(head, "WaitingForQuota"):
            assert queue.pop() is head
            queue.park(head)
            queue.bulk_move(head, "WaitingForQuota")
        if head is not None:
            assert model.pop() is head
            model.park(head)
            model.bulk_move(head)
    else:
        assert op == "bulk", op
        queue.bulk_move(wl, "WaitingForQuota")
        model.bulk_move(wl)


# A look-alike parked on arrival after a bulk move becomes its class's best and is pushed again
# (back to the heap): it must pop before an older workload of another class (it once did not).
PARKED_BEST = [("push", 0), ("bulk", 8), ("requeue-preempting", 2), ("push", 5), ("push", 5)]
# One workload of a bulk-moved class goes back to the heap alone (a head requeued at once): its
# look-alikes stay parked, each by itself, until the flush.
BACK_ALONE = [
    ("push", 0),
    ("push", 3),
    ("push", 6),
    ("bulk", 0),
    ("requeue-now", 3),
    ("pop", 0),
    ("push", 9),
    ("flush", 0),
]


@settings(max_examples=400)
@given(bulk_ops, st.sampled_from([BEST_EFFORT_FIFO, STRICT_FIFO]))
@example(PARKED_BEST, BEST_EFFORT_FIFO)
@example(BACK_ALONE, BEST_EFFORT_FIFO)
def test_the_class_heaps_pop_as_one_heap_would(steps: list[tuple[str, int]], strategy: str) -> None:
    """The per-class heaps, bulk moves and flushes against the obvious model, operation by operation."""
    pool = classed(12)
    queue = ClusterQueueQueue("cq", strategy, set())
    model = ModelQueue(strategy == STRICT_FIFO)
    for op, i in steps:
        wl = pool[i]
        if op == "delete":
            queue.delete(wl.key)
            model.active.pop(wl.key, None)
            model.inadmissible.pop(wl.key, None)
        else:
            both(queue, model, op, wl)
        assert queue.active == model.active
        assert queue.inadmissible == model.inadmissible
    while (left := model.pop()) is not None:
        assert queue.pop() is left
    assert queue.pop() is None


afs_ops = st.lists(
    st.tuples(
        st.sampled_from([*COMMON_OPS, "charge"]),
        st.integers(0, 11),
        st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    ),
    max_size=80,
)


@settings(max_examples=300)
@given(afs_ops)
@example([(op, i, 0.0) for op, i in PARKED_BEST])
def test_admission_fair_sharing_pops_the_lowest_usage_as_one_sort_would(steps: list[tuple[str, int, float]]) -> None:
    """AdmissionFairSharing's heap key (usage, then the usual key) against the obvious model while
    usages change between operations (an admission's entry penalty, then ``rekey``): workloads in
    four LocalQueues (index mod 4) and three equivalence classes, so usages tie and classes span
    LocalQueues."""
    pool = classed(12)
    usage = dict.fromkeys(range(4), 0.0)
    local_queue = {wl.key: i % 4 for i, wl in enumerate(pool)}

    def usage_of(wl: Workload) -> float:
        return usage[local_queue[wl.key]]

    queue = ClusterQueueQueue("cq", BEST_EFFORT_FIFO, set())
    queue.usage_of = usage_of
    model = ModelQueue(False, usage_of)
    for op, i, value in steps:
        if op == "charge":
            usage[i % 4] = value
            queue.rekey()
        else:
            both(queue, model, op, pool[i])
        assert queue.active == model.active
    while (left := model.pop()) is not None:
        assert queue.pop() is left
    assert queue.pop() is None
