"""Kueue v0.19.2: ``pkg/cache/queue/cluster_queue.go``, ``pkg/cache/queue/manager.go``,
``pkg/cache/queue/inadmissible_workloads.go``.

Pending workloads: one heap per ClusterQueue, plus the inadmissible set it parks heads in.

Heap order is ONE key, ``Workload.order``: higher effective priority first, then the older
queue-order timestamp, then uid or ``namespace/name``. A push counter follows the key in each heap
entry, so a requeued workload (same uid, same timestamp) never ties with its own stale entry.

Requeueing after a cycle follows the ClusterQueue's ``queueingStrategy`` (Kueue's
``RequeueIfNotPresent``):

* ``StrictFIFO``: an unadmitted head goes straight back into the heap, so it stays the head and
  blocks everything behind it, except on a namespace mismatch (parked);
* ``BestEffortFIFO``: only heads that failed *after* nomination (no longer fit, overlapping
  targets) or are waiting for their victims go back; the rest are parked as inadmissible so the
  next workload becomes head.

Parked workloads come back when capacity or configuration changes in their cohort tree
(a workload finished or was evicted, quota changed).

Scheduling equivalence (BestEffortFIFO, see equivalence.py): parking a head that got NoFit or
Preempt without candidates also parks every heap workload of its equivalence class, and the class
is remembered, so later pushes of it park at once, until the inadmissible workloads are flushed.

The heap is kept as one small heap per equivalence class under a heap of the classes' best
entries, so the order of pops is that of one heap over the active workloads, while a bulk move
and the flush that undoes it leave the class's entries in place. A bulk move only marks the class
(its workloads stay listed as in the heap, the mark says they are parked) and the flush only drops
the marks: after every capacity change a backlog of look-alikes comes back and is parked again,
and that costs one set operation per class, not a dictionary move per workload. A workload of a
marked class that goes back alone (rare) first turns the mark into parking each one by itself.

Sticky head (BestEffortFIFO, kubernetes-sigs/kueue#7157): a head requeued because it is waiting for
the workloads it preempted stays the head for the next pop, ahead of parked workloads that the
evictions flushed back. Without it, an older workload that cannot fit becomes head, the preemptor
misses the quota it freed, another queue's borrower takes it, and preemption repeats.

AdmissionFairSharing (admission_fairsharing.py): a ClusterQueue whose workloads Kueue orders by
their LocalQueue's usage first has a ``usage_of``, and its heap key is (usage, then ``Workload.order``). A usage
changes when a workload of its LocalQueue is admitted; ``rekey`` then rebuilds the heap, as Kueue's
``Pop`` rebuilds it (``rebuildAll``) while an entry penalty is pending. The sticky head goes first
only among the workloads of the lowest usage: Kueue compares usage before the sticky flag.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from gpufleet.twin.apis.specs import STRICT_FIFO
from gpufleet.twin.workload import Workload

Key = tuple[float | int | str, ...]  # Workload.order, or (usage, *Workload.order) under AdmissionFairSharing
Entry = tuple[Key, int, Workload]


class ClusterQueueQueue:
    """The pending side of one ClusterQueue; deletions are lazy (checked on pop).

    A workload is in one of three places: ``_live`` (it has its class heap's entry and counts as
    active), ``_solo`` (parked by itself), or ``_live`` under a class in ``_moved`` (parked with its
    class by a bulk move: the class stops being announced, its entries and ``_live`` stay as they
    are, and the flush only forgets the mark). ``active`` and ``inadmissible`` are the views.
    """

    __slots__ = (
        "_announced", "_classes", "_live", "_moved", "_parked", "_pushes", "_solo", "_spare", "_tops",
        "bulk", "name", "sticky", "strict", "usage_of",
    )  # fmt: skip

    def __init__(self, name: str, strategy: str, parked: set[str]) -> None:
        self.name = name
        self.strict = strategy == STRICT_FIFO
        self._classes: dict[int | None, list[Entry]] = {}  # equivalence class -> its heap
        self._tops: list[tuple[Key, int, int | None]] = []  # classes by best entry
        self._announced: dict[int | None, int] = {}  # class -> push number of its valid top entry
        # The list of the last class heap that emptied, for the next class: a queue that drains
        # and refills keeps one list instead of making one per refill for the collector.
        self._spare: list[Entry] | None = None
        self._pushes = 0
        self._live: dict[str, Workload] = {}  # in the heap: active unless its class is in _moved
        self._solo: dict[str, Workload] = {}  # parked one by one
        self._moved: set[int | None] = set()  # classes parked whole by a bulk move, never announced
        self._parked = parked  # shared: names of queues that hold parked workloads
        self.sticky: str | None = None  # a preemptor waiting for its victims: popped first, once
        # Equivalence classes bulk-moved since the last flush: (the reason Kueue stores, the head
        # whose failure moved them).
        self.bulk: dict[int | None, tuple[str, str]] = {}
        self.usage_of: Callable[[Workload], float] | None = None  # AdmissionFairSharing's usage

    @property
    def active(self) -> dict[str, Workload]:
        """The workloads in the heap (a copy: reports and tests read it, the scheduler does not)."""
        moved = self._moved
        return {key: wl for key, wl in self._live.items() if wl.equivalence not in moved}

    @property
    def inadmissible(self) -> dict[str, Workload]:
        """The parked workloads, one by one or with their class (a copy, as ``active``)."""
        moved = self._moved
        return {**{key: wl for key, wl in self._live.items() if wl.equivalence in moved}, **self._solo}

    def is_active(self, wl: Workload) -> bool:
        return self._live.get(wl.key) is wl and wl.equivalence not in self._moved

    def is_parked(self, wl: Workload) -> bool:
        return wl.key in self._solo or (wl.equivalence in self._moved and wl.key in self._live)

    def has_active(self) -> bool:
        """Whether a pop would give a workload (every class with an active workload is announced)."""
        return self._best() is not None

    def push(self, wl: Workload) -> bool:
        """Kueue's ``PushOrUpdate``: into the heap, or parked at once when an equivalent workload
        was bulk-moved since the last flush. Returns True when it was parked that way."""
        key, cls = wl.key, wl.equivalence
        live = key in self._live
        if live and cls not in self._moved:
            return False
        if self.bulk and cls in self.bulk and not self.strict and not live and key not in self._solo:
            if cls in self._moved:
                self._live[key] = wl  # parked with its class
                if not wl.heaped:
                    self._insert(wl)
            else:
                if not wl.heaped:
                    self._insert(wl)
                self.park(wl)
            self._parked.add(self.name)
            return True
        self._to_heap(wl)
        return False

    def _to_heap(self, wl: Workload) -> None:
        cls = wl.equivalence
        if cls in self._moved:
            self._unmove(cls)  # one of a moved class goes back alone (rare): park the rest one by one
        if wl.key in self._live:
            return
        self._solo.pop(wl.key, None)
        self._live[wl.key] = wl
        if not wl.heaped:
            self._insert(wl)
        elif cls not in self._announced:
            self._announce(cls)

    def _unmove(self, cls: int | None) -> None:
        """Turn a class's bulk move into parking each of its heap workloads by itself."""
        self._moved.discard(cls)
        live, solo = self._live, self._solo
        for _, _, wl in self._classes.get(cls, ()):
            if live.get(wl.key) is wl:
                del live[wl.key]
                solo[wl.key] = wl

    def _insert(self, wl: Workload) -> None:
        cls = wl.equivalence
        heap = self._classes.get(cls)
        if heap is None:
            heap = self._classes[cls] = self._spare if self._spare is not None else []
            self._spare = None
        self._pushes += 1
        usage_of = self.usage_of  # inlined: a call per push would cost the queues without AdmissionFairSharing
        entry = (wl.order if usage_of is None else (usage_of(wl), *wl.order), self._pushes, wl)
        heapq.heappush(heap, entry)
        wl.heaped = True
        if cls in self._moved:
            return  # announced again at the flush
        # The class's announced key must stay a lower bound of its heap: a new best entry is
        # announced even when it is parked (a look-alike arriving after a bulk move), or a parked
        # entry put back later (``_to_heap``) would sort behind another class's worse workload.
        # (The new entry is on top when the top carries its push number: numbers, not identity.)
        announced = cls in self._announced
        if (heap[0][1] == self._pushes and announced) or (
            not announced and (cls not in self.bulk or wl.key in self._live)
        ):
            self._announced[cls] = self._pushes
            heapq.heappush(self._tops, (heap[0][0], self._pushes, cls))

    def _announce(self, cls: int | None) -> None:
        heap = self._classes.get(cls)
        if heap:
            self._pushes += 1
            self._announced[cls] = self._pushes
            heapq.heappush(self._tops, (heap[0][0], self._pushes, cls))

    def park(self, wl: Workload) -> None:
        self._live.pop(wl.key, None)
        self._solo[wl.key] = wl
        self._parked.add(self.name)

    def _best(self) -> Workload | None:
        """The active workload first in order, left in place (stale entries on top go)."""
        tops, live, announced = self._tops, self._live, self._announced
        while tops:
            order, number, cls = tops[0]
            if announced.get(cls) != number:
                heapq.heappop(tops)
                continue
            heap = self._classes[cls]
            while heap and live.get(heap[0][2].key) is not heap[0][2]:
                heapq.heappop(heap)[2].heaped = False
            if not heap:
                heapq.heappop(tops)
                self._drop_class(cls)
                continue
            if heap[0][0] != order:  # the class's best went: announce the next one
                self._pushes += 1
                announced[cls] = self._pushes
                heapq.heapreplace(tops, (heap[0][0], self._pushes, cls))
                continue
            return heap[0][2]
        return None

    def _key(self, wl: Workload) -> Key:
        return wl.order if self.usage_of is None else (self.usage_of(wl), *wl.order)

    def _sticky_first(self, sticky: str | None) -> bool:
        """Whether the sticky head goes first: always, unless AdmissionFairSharing finds a
        LocalQueue with less usage (Kueue compares usage before the sticky flag)."""
        if sticky is None:
            return False
        wl = self._live.get(sticky)
        if wl is None or wl.equivalence in self._moved:
            return False
        if self.usage_of is None:
            return True
        best = self._best()
        return best is None or self.usage_of(best) >= self.usage_of(wl)

    def pop(self) -> Workload | None:
        sticky, self.sticky = self.sticky, None
        if sticky is not None and self._sticky_first(sticky):
            return self._live.pop(sticky)  # its heap entry is now stale and skipped later
        wl = self._best()
        if wl is None:
            return None
        cls = wl.equivalence
        heap = self._classes[cls]
        heapq.heappop(heap)
        wl.heaped = False
        del self._live[wl.key]
        if heap:
            self._pushes += 1
            self._announced[cls] = self._pushes
            heapq.heapreplace(self._tops, (heap[0][0], self._pushes, cls))
        else:
            heapq.heappop(self._tops)
            self._drop_class(cls)
        return wl

    def _drop_class(self, cls: int | None) -> None:
        """A class's heap emptied: forget the class, keep its list for the next one."""
        del self._announced[cls]
        self._spare = self._classes.pop(cls)

    def peek(self) -> Workload | None:
        """The workload ``pop`` would return, left in place."""
        sticky = self.sticky
        if sticky is not None and self._sticky_first(sticky):
            return self._live[sticky]
        return self._best()

    def delete(self, key: str) -> None:
        self._live.pop(key, None)
        self._solo.pop(key, None)

    def requeue(
        self, wl: Workload, *, immediate: bool, namespace_mismatch: bool = False, preempting: bool = False
    ) -> bool:
        """Put an unadmitted head back; returns True when it went back into the heap (active)."""
        if namespace_mismatch or not (immediate or self.strict):
            self.park(wl)
            return False
        self._to_heap(wl)
        if preempting and not self.strict:
            self.sticky = wl.key
        return True

    def bulk_move(self, head: Workload, reason: str) -> None:
        """Kueue's ``handleInadmissibleHash``, for a head just parked after NoFit or Preempt without
        candidates: remember its class with ``reason`` and park every heap workload of the class
        (BestEffortFIFO only; an unknown class moves nothing). The class is marked, not walked:
        its workloads stay where they are for the flush that brings them back."""
        cls = head.equivalence
        if self.strict or cls is None:
            return
        self.bulk[cls] = (reason, head.key)
        self._announced.pop(cls, None)
        self._moved.add(cls)

    def park_head(self, head: Workload, reason: str) -> bool:
        """``pop``, ``park`` and ``bulk_move`` of ``head``, the workload ``peek`` gives, in one step:
        its class is marked parked and the head stays in its class heap, as its look-alikes do
        (a parked head and a moved look-alike differ only in ``bulk``, which names the head). A
        rotation parks one calm head per cycle and the flush would put each back. False (nothing
        done, the caller takes the three steps): StrictFIFO, no class, or a sticky head."""
        cls = head.equivalence
        if self.strict or cls is None or self.sticky is not None:
            return False
        self.bulk[cls] = (reason, head.key)
        self._announced.pop(cls, None)
        self._moved.add(cls)
        self._parked.add(self.name)
        return True

    def bypassed(self, wl: Workload) -> str | None:
        """The reason stored with ``wl``'s class when it is parked only as an equivalent of a
        failed head (Kueue writes no condition for it), else None."""
        if not self.bulk or not self.is_parked(wl):
            return None
        found = self.bulk.get(wl.equivalence)
        return found[0] if found is not None and found[1] != wl.key else None

    def flush_inadmissible(self) -> None:
        """Kueue's ``queueInadmissibleWorkloads``: everything parked back into the heap, and the
        remembered equivalence classes forgotten."""
        self.bulk.clear()
        self._moved.clear()
        self._parked.discard(self.name)
        if self._solo:
            parked = list(self._solo.values())
            self._solo.clear()
            live = self._live
            for wl in parked:
                if wl.key not in live:
                    live[wl.key] = wl
                    if not wl.heaped:
                        self._insert(wl)
        self._announce_all()

    def _announce_all(self) -> None:
        self._tops.clear()  # cleared, not replaced: no new objects per flush for the collector
        self._announced.clear()
        moved = self._moved
        for cls, heap in self._classes.items():
            if not heap or cls in moved:
                continue
            self._pushes += 1
            self._announced[cls] = self._pushes
            self._tops.append((heap[0][0], self._pushes, cls))
        heapq.heapify(self._tops)

    def rekey(self) -> None:
        """AdmissionFairSharing: a LocalQueue's usage changed, so every entry gets its key again and
        every heap is rebuilt (Kueue's ``rebuildAll``). Entries of parked workloads stay."""
        if self.usage_of is None:
            return
        for heap in self._classes.values():
            heap[:] = [(self._key(wl), number, wl) for _, number, wl in heap]
            heapq.heapify(heap)
        self._announce_all()

    def __len__(self) -> int:
        return len(self._live) + len(self._solo)

    def in_order(self) -> Iterator[Workload]:
        """Pending workloads in heap order (active first), for positions in reports."""
        key = self._key
        yield from sorted(self.active.values(), key=key)
        yield from sorted(self.inadmissible.values(), key=key)


class Queues:
    """All ClusterQueue queues; ``heads`` pops one workload from each active one, in name order.

    Capacity changes only mark a cohort tree dirty; its parked workloads move back into their
    heaps once, before the next cycle takes heads (as Kueue's requeue of inadmissible workloads
    lands before the scheduler's next pass), and only queues that hold parked workloads are visited.
    """

    def __init__(self) -> None:
        self.by_cq: dict[str, ClusterQueueQueue] = {}
        self.root_of: dict[str, str] = {}
        self._parked: set[str] = set()
        self._dirty: set[str] = set()
        self.serving: list[ClusterQueueQueue] = []  # queues heads are taken from (active ClusterQueues)

    def add_cluster_queue(self, name: str, strategy: str, root: str) -> None:
        self.by_cq[name] = ClusterQueueQueue(name, strategy, self._parked)
        self.root_of[name] = root

    def capacity_changed(self, root: str) -> None:
        self._dirty.add(root)

    def parked(self) -> bool:
        """Whether any queue holds parked (inadmissible) workloads."""
        return bool(self._parked)

    def dirty_parked(self) -> bool:
        return bool(self._dirty) and any(self.root_of[n] in self._dirty for n in self._parked)

    def set_active(self, names: list[str]) -> None:
        """Only active ClusterQueues give heads; name order keeps every run reproducible."""
        self.serving = [self.by_cq[name] for name in sorted(names)]

    def heads(self) -> list[Workload]:
        if self._dirty:
            for name in [n for n in self._parked if self.root_of[n] in self._dirty]:
                self.by_cq[name].flush_inadmissible()
            self._dirty.clear()
        result = []
        for queue in self.serving:
            if queue.sticky is None or queue.has_active():  # a pop with nothing to give forgets the sticky head
                wl = queue.pop()
                if wl is not None:
                    result.append(wl)
        return result
