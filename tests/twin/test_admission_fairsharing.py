"""AdmissionFairSharing: the usage arithmetic (Kueue's ``pkg/util/admissionfairsharing``) and
hand-built clusters where a LocalQueue's usage decides who is admitted, or preempted, first.

Each cluster test names the order the classic key (priority, creation time) would give; the
twin without AdmissionFairSharing gives that order, so every such test fails on a twin that
ignores the Configuration's ``admissionFairSharing``.
"""

from __future__ import annotations

import math

import pytest

from gpufleet.twin.apis.admission_fairsharing_fields import parse_duration
from gpufleet.twin.apis.objects import parse_cluster
from gpufleet.twin.apis.specs import AdmissionFairSharingSpec
from gpufleet.twin.kueue import Twin
from gpufleet.twin.queue.admission_fairsharing import (
    NANO,
    alpha,
    decayed,
    entry_penalty,
    scaled,
    seconds,
    to_nano,
    usage,
)

MINUTE = 60 * NANO
HOUR = 60 * MINUTE


# --- the arithmetic ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("since_update_s", "half_life_s", "want"),  # simulated seconds given to the formula: no clock is read
    [
        (10.0, 10.0, 0.5),  # one half-life: half the way to the new value
        (20.0, 10.0, 0.75),
        (0.0, 10.0, 0.0),
        (5.0, 0.0, 0.0),  # no half-life: calculateAlphaRate's 0
        (1.0, 10.0, 1 - 0.5**0.1),
    ],
)
def test_alpha(since_update_s: float, half_life_s: float, want: float) -> None:
    assert alpha(since_update_s, half_life_s) == pytest.approx(want, abs=0, rel=1e-15)


@pytest.mark.parametrize(
    ("amount", "factor", "want"),
    [
        (4 * NANO, 1 - 0.5**0.1, 267_868_033),  # 0.2678680338... cpu, rounded down at nine decimals
        (1, 0.5, 0),  # half a nano-unit rounds down to nothing
        (3, 0.5, 1),
        (8 * NANO, 1.0, 8 * NANO),
        (8 * NANO, 0.0, 0),
        (10**30, 0.1, 10**29),  # far beyond int64: no overflow (MulByFloat works on decimals)
    ],
)
def test_scaled_rounds_down_like_mul_by_float(amount: int, factor: float, want: int) -> None:
    assert scaled(amount, factor) == want


@pytest.mark.parametrize(
    ("text", "nanoseconds"),
    [
        ("5m", 5 * MINUTE),
        ("1h30m", 90 * MINUTE),
        ("168h", 168 * HOUR),
        ("1.5s", 1_500_000_000),
        ("300ms", 300_000_000),
        ("0", 0),
        ("-1m", -MINUTE),
    ],
)
def test_go_durations(text: str, nanoseconds: int) -> None:
    assert parse_duration(text) == nanoseconds


@pytest.mark.parametrize("text", ["", "5", "m", "1x", "1h 30m", "10 minutes", "."])
def test_malformed_go_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_seconds_as_go_reads_a_duration() -> None:
    assert seconds(90 * MINUTE) == 5400.0
    assert seconds(1_500_000_000) == 1.5


def test_entry_penalty_is_alpha_of_the_sampling_interval_times_the_requests() -> None:
    config = AdmissionFairSharingSpec(usage_half_life_ns=10 * NANO, usage_sampling_interval_ns=1 * NANO)
    assert entry_penalty({"cpu": 4 * NANO}, config) == {"cpu": 267_868_033}
    # Kueue's TestCalculateEntryPenaltyWithLongHalfLife: a week's half-life still charges something
    week = AdmissionFairSharingSpec(usage_half_life_ns=168 * HOUR, usage_sampling_interval_ns=5 * MINUTE)
    penalty = entry_penalty({"cpu": 2 * NANO, "nvidia.com/gpu": NANO}, week)
    assert all(q > 0 for q in penalty.values()), penalty
    # no half-life: no penalty (calculateAlphaRate's 0)
    assert entry_penalty({"cpu": 4 * NANO}, AdmissionFairSharingSpec(usage_half_life_ns=0)) == {"cpu": 0}


def test_twin_units_in_nano_units() -> None:
    assert to_nano(1500, "cpu") == 1_500_000_000  # milli-cpu
    assert to_nano(2, "nvidia.com/gpu") == 2 * NANO
    assert to_nano(1024, "memory") == 1024 * NANO


def test_decay_accumulates_below_one_milli_unit() -> None:
    """Kueue's TestCalculateDecayedConsumedAccumulatesSubMilli: a week's half-life sampled every five
    minutes adds less than a milli-unit per sample, and it still grows each time."""
    live = {"cpu": 2 * NANO, "nvidia.com/gpu": NANO}
    consumed: dict[str, int] = {}
    previous = {"cpu": 0, "nvidia.com/gpu": 0}
    for sample in range(1, 4):
        consumed = decayed(consumed, live, 300.0, 168 * 3600.0)
        assert all(consumed[r] > previous[r] for r in live), consumed
        assert consumed["nvidia.com/gpu"] < sample * 1_000_000  # under a milli-GPU per sample
        previous = consumed


def test_decay_converges_to_usage_on_the_half_life_curve() -> None:
    """Kueue's TestCalculateDecayedConsumedConvergesToUsage: 1 - 0.5^n of the way after n half-lives,
    within a milli-unit, never above the usage."""
    live = {"cpu": 2 * NANO}
    consumed: dict[str, int] = {}
    for half_lives, want in ((1, 1.0), (2, 1.5), (3, 1.75)):
        for _ in range(2016):  # 168h / 5m
            consumed = decayed(consumed, live, 300.0, 168 * 3600.0)
        assert abs(consumed["cpu"] - want * NANO) <= 1_000_000, (half_lives, consumed)
        assert consumed["cpu"] <= live["cpu"]


@pytest.mark.parametrize("size", [16 * 2**30, 2**40, 64 * 2**40])
def test_decay_keeps_large_quantities_positive(size: int) -> None:
    assert decayed({}, {"memory": size * NANO}, 300.0, 168 * 3600.0)["memory"] > 0


@pytest.mark.parametrize(
    ("consumed", "weight", "resource_weights", "want"),
    [  # Kueue's TestCalculateUsageWithDRA, in nano-units
        ({"gpu-logical": 2 * NANO}, 1.0, {}, 2.0),
        ({"gpu-logical": 2 * NANO}, 1.0, {"gpu-logical": 3.0}, 6.0),
        ({"cpu": 4 * NANO, "gpu-logical": 2 * NANO}, 1.0, {"cpu": 1.0, "gpu-logical": 5.0}, 14.0),
        ({"gpu-logical": 10 * NANO}, 1.0, {"gpu-logical": 0.0}, 0.0),
        ({"gpu-logical": 3 * NANO}, 2.0, {"gpu-logical": 4.0}, 6.0),
        ({"cpu": 1_500_000_000}, 1.0, {}, 1.5),  # cpu counts in cores, not milli-cores
        ({}, 0.0, {}, math.inf),  # TestCalculateUsageWithNonPositiveWeight: +Inf, never NaN
        ({"cpu": 4 * NANO}, 0.0, {}, math.inf),
        ({"cpu": 4 * NANO}, -1.0, {}, math.inf),
    ],
)
def test_usage(consumed: dict[str, int], weight: float, resource_weights: dict[str, float], want: float) -> None:
    assert usage(consumed, weight, resource_weights) == want


# --- clusters ----------------------------------------------------------------------------------
T0 = "2025-01-01T00:00:00Z"


def config(section: str = "usageHalfLifeTime: 10m, usageSamplingInterval: 5m", gates: str = "") -> str:
    return (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        f"admissionFairSharing: {{{section}}}\n{gates}---\n"
    )


def cluster_queue(cpu: int = 8, gpu: int = 0, *, afs: bool = True, preemption: str = "") -> str:
    scope = "  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}\n" if afs else ""
    gpus = f", {{name: nvidia.com/gpu, nominalQuota: {gpu}}}" if gpu else ""
    covered = "[cpu, nvidia.com/gpu]" if gpu else "[cpu]"
    return (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default}\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n"
        f"  namespaceSelector: {{}}\n{scope}{preemption}"
        f"  resourceGroups: [{{coveredResources: {covered}, flavors: [{{name: default, resources: "
        f"[{{name: cpu, nominalQuota: {cpu}}}{gpus}]}}]}}]\n---\n"
    )


def local_queue(name: str, consumed: str = "", weight: str = "1", last_update: str = T0) -> str:
    status = (
        f"status: {{fairSharing: {{weightedShare: 0, admissionFairSharingStatus: "
        f"{{consumedResources: {{{consumed}}}, lastUpdate: '{last_update}'}}}}}}\n"
        if consumed
        else ""
    )
    return (
        f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{namespace: ns, name: {name}}}\n"
        f"spec: {{clusterQueue: cq, fairSharing: {{weight: '{weight}'}}}}\n{status}---\n"
    )


def workload(
    name: str, queue: str, second: int, requests: str = "cpu: 4", priority: int = 0, admitted: str = ""
) -> str:
    text = (
        f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {{namespace: ns, name: {name}, "
        f"creationTimestamp: '2025-01-01T00:00:{second:02d}Z'}}\n"
        f"spec:\n  queueName: {queue}\n  priority: {priority}\n  podSets: [{{name: main, count: 1, template: "
        f"{{spec: {{containers: [{{name: c, resources: {{requests: {{{requests}}}}}}}]}}}}}}]\n"
    )
    if admitted:
        flavors = ", ".join(f"{r.split(':')[0].strip()}: default" for r in requests.split(","))
        text += (
            f"status:\n  admission: {{clusterQueue: cq, podSetAssignments: [{{name: main, count: 1, "
            f"flavors: {{{flavors}}}}}]}}\n  conditions: [{{type: QuotaReserved, status: 'True', "
            f"reason: QuotaReserved, lastTransitionTime: '{admitted}'}}]\n"
        )
    return text + "---\n"


def admissions(text: str, cycles: int | None = None) -> list[str]:
    """The workloads admitted, in order, by ``Twin`` run until stable (or ``cycles`` cycles)."""
    twin = Twin(parse_cluster([("cluster.yaml", text)]))
    return [a.workload.split("/")[1] for result in twin.run(cycles) for a in result.admitted]


def test_local_queue_weight_divides_the_usage() -> None:
    """lq-a consumed 8 cpu at weight 4 (usage 2) goes before lq-b's 3 cpu at weight 1, though lq-b's
    workload is older; at weight 1 lq-a would go last."""
    objects = workload("a1", "lq-a", 5) + workload("b1", "lq-b", 1) + cluster_queue(cpu=4)
    weighted = config() + local_queue("lq-a", "cpu: '8'", weight="4") + local_queue("lq-b", "cpu: '3'")
    assert admissions(weighted + objects, cycles=1) == ["a1"]
    plain = config() + local_queue("lq-a", "cpu: '8'") + local_queue("lq-b", "cpu: '3'")
    assert admissions(plain + objects, cycles=1) == ["b1"]


def test_resource_weights_weigh_each_resource() -> None:
    """lq-a consumed 2 cpu (usage 2), lq-b 1 GPU (usage 1): lq-b's newer workload goes first; with
    resourceWeights nvidia.com/gpu: 10, lq-b's usage is 10 and lq-a's workload goes first."""
    objects = (
        cluster_queue(cpu=4, gpu=1)
        + local_queue("lq-a", "cpu: '2'")
        + local_queue("lq-b", "nvidia.com/gpu: '1'")
        + workload("a1", "lq-a", 1, "cpu: 4")
        + workload("b1", "lq-b", 2, "cpu: 4")
    )
    assert admissions(config() + objects, cycles=1) == ["b1"]
    weighted = config("usageHalfLifeTime: 10m, resourceWeights: {nvidia.com/gpu: 10}")
    assert admissions(weighted + objects, cycles=1) == ["a1"]


def test_usage_goes_before_priority() -> None:
    """Kueue compares the LocalQueue's usage before priority: a priority-100 workload of a busy queue
    waits behind a priority-0 one of an idle queue."""
    text = (
        config()
        + cluster_queue(cpu=4)
        + local_queue("busy", "cpu: '6'")
        + local_queue("idle", "cpu: '1'")
        + workload("urgent", "busy", 1, priority=100)
        + workload("routine", "idle", 2)
    )
    assert admissions(text, cycles=1) == ["routine"]


def test_entry_penalties_alternate_local_queues_within_a_run() -> None:
    """Two idle LocalQueues: each admission charges its LocalQueue alpha(5m / 10m) = 29 % of the
    request at once, so the next cycle serves the other queue. The classic key would admit all of
    lq-a's older workloads first."""
    text = (
        config()
        + cluster_queue(cpu=16)
        + local_queue("lq-a")
        + local_queue("lq-b")
        + "".join(workload(f"a{i}", "lq-a", i) for i in range(1, 4))
        + "".join(workload(f"b{i}", "lq-b", 3 + i) for i in range(1, 4))
    )
    assert admissions(text) == ["a1", "b1", "a2", "b2"]


def test_without_admission_scope_the_classic_order_stays() -> None:
    text = (
        config()
        + cluster_queue(cpu=4, afs=False)
        + local_queue("lq-a", "cpu: '8'")
        + local_queue("lq-b")
        + workload("a1", "lq-a", 1)
        + workload("b1", "lq-b", 2)
    )
    assert admissions(text, cycles=1) == ["a1"]


@pytest.mark.parametrize(
    ("last_update", "first"),
    [
        (T0, "b1"),  # sampled just now: lq-a's 100 cpu stand
        ("2024-12-31T23:00:00Z", "a1"),  # an hour (12 samples, 6 half-lives) ago: 100 cpu decayed to 1.56
    ],
)
def test_sampling_decays_usage_up_to_the_newest_timestamp(last_update: str, first: str) -> None:
    text = (
        config()
        + cluster_queue(cpu=4)
        + local_queue("lq-a", "cpu: '100'", last_update=last_update)
        + local_queue("lq-b", "cpu: '5'")
        + workload("a1", "lq-a", 1)
        + workload("b1", "lq-b", 2)
    )
    assert admissions(text, cycles=1) == [first]


def test_sampling_moves_usage_towards_what_the_local_queue_runs() -> None:
    """The hook a clock calls: lq-a runs 4 cpu and consumed nothing so far; after one half-life of
    samples its usage is half of 4 cpu, as Kueue's LocalQueue controller computes it."""
    text = config("usageHalfLifeTime: 10m, usageSamplingInterval: 5m") + cluster_queue(cpu=8)
    text += local_queue("lq-a", "cpu: '0'") + workload("run", "lq-a", 0, admitted=T0)
    twin = Twin(parse_cluster([("cluster.yaml", text)]))
    assert twin.afs is not None
    assert twin.afs.usage("ns/lq-a") == 0.0
    twin.sample_usage(10 * 60 * 1000 + 1_735_689_600_000)  # T0 + 10 minutes: two samples
    assert twin.afs.usage("ns/lq-a") == pytest.approx(2.0, abs=1e-8)


@pytest.mark.parametrize("memo", [False, True], ids=["reference", "fast"])
def test_preemption_picks_the_victim_of_the_busier_local_queue(memo: bool) -> None:
    """Kueue's CandidatesOrdering step 2: within a usage-based ClusterQueue, a candidate of a
    LocalQueue with more usage goes before priority and reservation time. Without it the victim is
    the one admitted more recently (old-b)."""
    preemption = "  preemption: {withinClusterQueue: LowerPriority}\n"
    running = workload("old-a", "lq-a", 0, admitted="2025-01-01T00:00:01Z") + workload(
        "old-b", "lq-b", 0, admitted="2025-01-01T00:00:02Z"
    )
    queues = local_queue("lq-a", "cpu: '9'") + local_queue("lq-b", "cpu: '1'") + local_queue("lq-c")
    text = cluster_queue(cpu=8, preemption=preemption) + queues + running + workload("new", "lq-c", 3, priority=10)
    for afs, victim in ((True, "ns/old-a"), (False, "ns/old-b")):
        gates = "" if afs else "featureGates: {AdmissionFairSharing: false}\n"
        twin = Twin(parse_cluster([("cluster.yaml", config(gates=gates) + text)]), fast=memo)
        (result,) = list(twin.run(cycles=1))
        assert [p.workload for p in result.preempted] == [victim], afs


def test_the_objects_as_kubectl_prints_them() -> None:
    """The Configuration's section, the ClusterQueue's admissionScope, and a LocalQueue's weight and
    status as ``kubectl get -o yaml`` prints them (Kueue writes consumedResources in nano-units)."""
    text = (
        config("usageHalfLifeTime: 168h, usageSamplingInterval: 90s, resourceWeights: {cpu: 0.5, nvidia.com/gpu: 4}")
        + cluster_queue()
        + local_queue("lq-a", "cpu: 5333333333n, memory: 1Gi, nvidia.com/gpu: '2'", weight="0.5")
        + local_queue("lq-b")
    )
    spec = parse_cluster([("cluster.yaml", text)])
    afs = spec.config.admission_fair_sharing
    assert afs == AdmissionFairSharingSpec(168 * HOUR, 90 * NANO, (("cpu", 0.5), ("nvidia.com/gpu", 4.0)))
    assert spec.cluster_queues["cq"].admission_mode == "UsageBasedAdmissionFairSharing"
    lq = spec.local_queues["ns/lq-a"]
    assert lq.fair_weight == 0.5
    assert lq.consumed == (("cpu", 5_333_333_333), ("memory", 2**30 * NANO), ("nvidia.com/gpu", 2 * NANO))
    assert lq.last_update == 1_735_689_600_000  # 2025-01-01T00:00:00Z in epoch ms
    assert spec.local_queues["ns/lq-b"].last_update is None
    twin = Twin(spec)
    assert twin.afs is not None
    # (0.5 * 5.333333333 + 1 * 2^30 + 4 * 2) / 0.5: cpu in cores, memory in bytes, weighted
    assert twin.afs.usage("ns/lq-a") == pytest.approx((0.5 * 5.333333333 + 2**30 + 8) / 0.5)


def test_sampling_interval_defaults_to_five_minutes() -> None:
    spec = parse_cluster([("cluster.yaml", config("usageHalfLifeTime: 1h") + cluster_queue())])
    assert spec.config.admission_fair_sharing == AdmissionFairSharingSpec(HOUR, 5 * MINUTE, ())
