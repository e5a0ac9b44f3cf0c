"""The reference path and the fast path of the twin give the same cycles.

Differential property test through the public API: random clusters (one or two cohorts, nested or
not, two to four ClusterQueues, one or two flavors, nominal quota with borrowing and lending
limits, cohorts with quota of their own or none, whenCanBorrow MayStopSearch or TryNextFlavor, each preemption policy, fair sharing on or
off, BestEffortFIFO and StrictFIFO, AdmissionFairSharing on or off per ClusterQueue with two LocalQueues of drawn usage) and random
streams of arrivals (drawn from a few shapes, so backlogs of scheduling equivalents form),
completions and finished evictions run through three twins:

* the reference path, ``Twin(spec, fast=False)`` (``fast`` is the one switch of every shortcut in
  ``twin/fastpath/``): Kueue's ``schedule()`` with every verdict worked out afresh;
* the fast path cycle by cycle (``fast=True``, the default: memo, plans, bound, share cache):
  every cycle must be the same, value for value;
* the full fast path of the simulator (``fast=True, streaks=True``), which returns a streak of
  quiet cycles as one result: the same admissions, evictions and verdicts in the same order, the
  same number of cycles, and the same pending workloads with the same reasons.

Half the examples run on Kueue's clocks (twin/clocks.py), with a drawn release delay, the victims'
quota released by the twin's timer or (as the simulator does) by the caller: the same cycles at
the same milliseconds on every path. A run that never settles is cut at a horizon of Kueue's time
(``run(until=...)``), which every path honours at the same timer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.twin import Twin, parse_cluster
from gpufleet.twin.apis.specs import PodSetSpec, WorkloadSpec
from gpufleet.twin.clocks import ClockSettings

POLICIES = ["Never", "LowerPriority", "Any"]
WITHIN = ["Never", "LowerPriority", "LowerPriority", "LowerOrNewerEqualPriority"]
FLAVORS = ["f0", "f1"]


@dataclass(frozen=True)
class Queue:
    cohort: int  # -1: none
    strategy: str
    nominal: tuple[int, ...]  # per flavor
    borrowing: int | None
    lending: int | None
    reclaim: str
    borrow_within: str
    within: str
    weight: int
    afs: bool  # admissionScope UsageBasedAdmissionFairSharing (when the Configuration has the section)
    consumed: tuple[int, int]  # status consumedResources (GPUs) of its two LocalQueues


@dataclass(frozen=True)
class Cluster:
    flavors: int
    nested: bool  # cohort 1 is a child of cohort 0
    fair: bool
    afs: bool  # the Configuration's admissionFairSharing section
    queues: tuple[Queue, ...]
    try_next: bool = False  # flavorFungibility whenCanBorrow: TryNextFlavor (plain-Fit plans must not stop)
    cohort_quota: int = 0  # each cohort's own nominal quota per flavor (classic preemption's hierarchical advantage)


def quantity(value: int | None, name: str) -> str:
    return "" if value is None else f", {name}: '{value}'"


def cluster_yaml(c: Cluster) -> str:
    docs = [f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {{name: {f}}}" for f in FLAVORS]
    docs.append("apiVersion: v1\nkind: Namespace\nmetadata: {name: team}")
    if c.fair or c.afs:
        sections = ("fairSharing: {}\n" if c.fair else "") + (
            "admissionFairSharing: {usageHalfLifeTime: 10m, usageSamplingInterval: 5m}\n" if c.afs else ""
        )
        docs.append(f"apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n{sections}")
    quota = []
    if c.cohort_quota:
        flavors = ", ".join(
            f"{{name: {FLAVORS[f]}, resources: [{{name: gpu, nominalQuota: '{c.cohort_quota}'}}]}}"
            for f in range(c.flavors)
        )
        quota.append(f"resourceGroups: [{{coveredResources: [gpu], flavors: [{flavors}]}}]")
    for name, parent in (("c0", []), ("c1", ["parentName: c0"] if c.nested else [])):
        spec = ", ".join(parent + quota)
        docs.append(f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {{name: {name}}}\nspec: {{{spec}}}")
    for i, q in enumerate(c.queues):
        flavors = "\n".join(
            f"    - name: {FLAVORS[f]}\n      resources:\n      - {{name: gpu, nominalQuota: '{q.nominal[f]}'"
            f"{quantity(q.borrowing, 'borrowingLimit')}{quantity(q.lending, 'lendingLimit')}}}"
            for f in range(c.flavors)
        )
        cohort = f"  cohortName: c{q.cohort}\n" if q.cohort >= 0 else ""
        fungibility = "  flavorFungibility: {whenCanBorrow: TryNextFlavor}\n" if c.try_next else ""
        scope = "  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}\n" if q.afs else ""
        local_queues = "\n---\n".join(
            f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{namespace: team, name: q{i}{suffix}}}
spec: {{clusterQueue: q{i}, fairSharing: {{weight: '{1 + j}'}}}}
status:
  fairSharing:
    weightedShare: 0
    admissionFairSharingStatus: {{consumedResources: {{gpu: '{used}'}}, lastUpdate: '1970-01-01T00:00:00Z'}}"""
            for j, (suffix, used) in enumerate(zip(("", "b"), q.consumed, strict=True))
        )
        docs.append(
            f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: q{i}}}
spec:
{cohort}{scope}  namespaceSelector: {{}}
{fungibility}  queueingStrategy: {q.strategy}
  fairSharing: {{weight: '{q.weight}'}}
  preemption:
    reclaimWithinCohort: {q.reclaim}
    withinClusterQueue: {q.within}
    borrowWithinCohort: {{policy: {q.borrow_within}}}
  resourceGroups:
  - coveredResources: [gpu]
    flavors:
{flavors}
---
{local_queues}"""
        )
    return "\n---\n".join(docs)


queues = st.builds(
    Queue,
    cohort=st.integers(-1, 1),
    strategy=st.sampled_from(["BestEffortFIFO", "BestEffortFIFO", "StrictFIFO"]),
    nominal=st.tuples(st.integers(0, 6), st.integers(0, 6)),
    borrowing=st.one_of(st.none(), st.integers(0, 8)),
    lending=st.one_of(st.none(), st.integers(0, 4)),
    reclaim=st.sampled_from(POLICIES),
    borrow_within=st.sampled_from(["Never", "LowerPriority"]),
    within=st.sampled_from(WITHIN),
    weight=st.sampled_from([0, 1, 1, 2]),
    afs=st.booleans(),
    consumed=st.tuples(st.sampled_from([0, 0, 2, 5]), st.sampled_from([0, 2, 5])),
)
clusters = st.builds(
    Cluster,
    flavors=st.integers(1, 2),
    nested=st.booleans(),
    fair=st.booleans(),
    afs=st.booleans(),
    queues=st.lists(queues, min_size=2, max_size=4).map(tuple),
    try_next=st.booleans(),
    cohort_quota=st.sampled_from([0, 0, 2, 4]),
)
SHAPES = [(1, 1), (1, 2), (2, 2), (1, 4), (3, 3)]  # (pods, GPUs per pod): few, so look-alikes repeat


@dataclass(frozen=True)
class Arrive:
    queue: int
    shape: int
    priority: int
    copies: int = 1  # look-alikes arriving together: a backlog of scheduling equivalents
    second: bool = False  # to the ClusterQueue's second LocalQueue (AdmissionFairSharing tells them apart)


@dataclass(frozen=True)
class Finish:
    pick: int


@dataclass(frozen=True)
class Gone:
    pick: int


arrivals = st.builds(
    Arrive,
    st.integers(0, 3),
    st.integers(0, len(SHAPES) - 1),
    st.sampled_from([0, 0, 10]),
    st.integers(1, 3),
    st.booleans(),
)
events = st.lists(
    st.one_of(
        arrivals,
        arrivals,
        arrivals,
        st.builds(Finish, st.integers(0, 100)),
        st.builds(Gone, st.integers(0, 100)),
    ),
    min_size=5,
    max_size=80,
)


def play(twin: Twin, stream: list[Any], queue_count: int) -> list[tuple[Any, ...]]:
    """Apply the stream; after each event, cycles until stable. Returns every cycle result."""
    log: list[tuple[Any, ...]] = []
    for t, event in enumerate(stream):
        if isinstance(event, Arrive):
            pods, gpus = SHAPES[event.shape]
            pod_sets = (PodSetSpec("main", pods, (("gpu", gpus),)),)
            queue = f"q{event.queue % queue_count}" + ("b" if event.second else "")
            for c in range(event.copies):
                name = f"w{t:03}-{c}"
                twin.add_workload(
                    WorkloadSpec("team", name, queue, pod_sets, priority=event.priority, created=t * 4 + c, uid=name)
                )
        else:
            held = sorted(
                key
                for key, w in twin.workloads.items()
                if w.admission is not None and w.evicted == isinstance(event, Gone)
            )
            if not held:
                continue
            key = held[event.pick % len(held)]
            if isinstance(event, Gone):
                twin.evicted_gone(key)
            else:
                twin.finish(key)
        until = twin.clock.now + HORIZON_MS if twin.clock is not None else None
        log += [
            (r.number, r.admitted, r.preempted, r.pending, r.stable, _now(twin)) for r in twin.run(None, until=until)
        ]
    return log


HORIZON_MS = 20_000  # of Kueue's time per event: preempt-back loops go round a few times, then stop


def _now(twin: Twin) -> int:
    return twin.clock.now if twin.clock is not None else 0


def flat(log: list[tuple[Any, ...]]) -> tuple[list[Any], list[Any], list[Any]]:
    return [a for c in log for a in c[1]], [p for c in log for p in c[2]], [p for c in log for p in c[3]]


SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Kueue's figures, and short ones so that timers fall inside streaks and bulk rotations.
clock_settings = st.one_of(
    st.none(),
    st.just(ClockSettings()),
    st.builds(
        ClockSettings,
        release_delay_ms=st.sampled_from([0, 1, 5, 20, 1000, 2500]),
        requeue_batch_ms=st.sampled_from([1, 7, 30, 1000]),
    ),
)


@settings(SETTINGS, max_examples=200)
@given(clusters, events, clock_settings, st.booleans())
def test_reference_and_fast_paths_agree(
    cluster: Cluster, stream: list[Any], clocks: ClockSettings | None, hold: bool
) -> None:
    _agree(cluster, stream, clocks, hold)


short_clocks = st.builds(
    ClockSettings, release_delay_ms=st.sampled_from([1, 5, 20, 60]), requeue_batch_ms=st.sampled_from([3, 7, 30])
)


@settings(SETTINGS, max_examples=200)
@given(clusters, events, short_clocks, st.booleans())
def test_paths_agree_when_timers_fall_inside_streaks(
    cluster: Cluster, stream: list[Any], clocks: ClockSettings, hold: bool
) -> None:
    """Timers of a few milliseconds fire between the cycles of a quiet streak or a bulk rotation
    (whose backoff steps are 1 to 10 ms): the fast path must end them there (``Twin.quiet_next``)."""
    _agree(cluster, stream, clocks, hold)


afs_clusters = st.builds(
    Cluster,
    flavors=st.integers(1, 2),
    nested=st.booleans(),
    fair=st.booleans(),
    afs=st.just(True),
    queues=st.lists(
        st.builds(
            replace,
            queues,
            afs=st.just(True),
            within=st.sampled_from(WITHIN[1:]),  # preemption within the queue: candidates of both LocalQueues
            consumed=st.sampled_from([(0, 5), (5, 0), (2, 2)]),
        ),
        min_size=2,
        max_size=3,
    ).map(tuple),
)


@settings(SETTINGS, max_examples=80)
@given(afs_clusters, events, clock_settings, st.booleans())
def test_reference_and_fast_paths_agree_under_admission_fair_sharing(
    cluster: Cluster, stream: list[Any], clocks: ClockSettings | None, hold: bool
) -> None:
    """Every ClusterQueue usage-based: LocalQueue usage orders the heaps and preemption's candidates,
    and each admission's entry penalty changes both (on Kueue's clocks the usage is sampled too)."""
    _agree(cluster, stream, clocks, hold)


def _agree(cluster: Cluster, stream: list[Any], clocks: ClockSettings | None, hold: bool) -> None:
    spec = parse_cluster([("cluster.yaml", cluster_yaml(cluster))])
    count = len(cluster.queues)
    hold = hold or clocks is None  # without clocks the caller always releases (the simulator's way)
    reference = Twin(spec, hold_evicted_quota=hold, fast=False, clocks=clocks)
    memo = Twin(spec, hold_evicted_quota=hold, clocks=clocks)
    fast = Twin(spec, hold_evicted_quota=hold, streaks=True, clocks=clocks)
    expected = play(reference, stream, count)
    assert play(memo, stream, count) == expected
    assert flat(play(fast, stream, count)) == flat(expected)
    assert fast.cycle == reference.cycle == memo.cycle
    assert _now(fast) == _now(reference) == _now(memo)
    assert fast.pending() == reference.pending() == memo.pending()
    assert fast.statuses() == reference.statuses()


def test_a_bulk_rotation_stops_where_a_release_timer_fires() -> None:
    """q1's hi preempts low and waits for its release (20 ms); meanwhile q2's backlog of fifteen
    heads that can never fit (no quota, each its own equivalence class) rotates in quiet cycles
    1, 2, 4, 8, 10 ms apart. The release falls inside that rotation: the fast path must stop
    rotating there, so hi is admitted in the same cycle, at the same millisecond, on both paths."""
    text = cluster_yaml(
        Cluster(
            flavors=1,
            nested=False,
            fair=False,
            afs=False,
            queues=(
                Queue(-1, "BestEffortFIFO", (4, 0), None, None, "Never", "Never", "LowerPriority", 1, False, (0, 0)),
                Queue(-1, "BestEffortFIFO", (0, 0), None, None, "Never", "Never", "Never", 1, False, (0, 0)),
            ),
        )
    )
    spec = parse_cluster([("cluster.yaml", text)])
    gpu = (PodSetSpec("main", 1, (("gpu", 4),)),)
    clocks = ClockSettings(release_delay_ms=20)
    logs = []
    for twin in (Twin(spec, fast=False, clocks=clocks), Twin(spec, streaks=True, clocks=clocks)):
        twin.add_workload(WorkloadSpec("team", "low", "q0", gpu, priority=0, created=0, uid="low"))
        list(twin.run(None))
        twin.add_workload(WorkloadSpec("team", "hi", "q0", gpu, priority=10, created=1, uid="hi"))
        for i in range(15):
            twin.add_workload(WorkloadSpec("team", f"b{i:02}", "q1", gpu, priority=i, created=2 + i, uid=f"b{i:02}"))
        log = [(r.admitted, r.preempted, r.pending, _now(twin), twin.cycle) for r in twin.run(None)]
        admitted_at = next((now, cycle) for adm, _, _, now, cycle in log if adm)
        logs.append((flat([(0, a, p, q) for a, p, q, _, _ in log]), admitted_at, twin.cycle, _now(twin)))
    reference, fast = logs
    assert fast == reference
    assert reference[1][1] > 5  # hi was admitted after the rotation had run a few cycles
