"""Device bookkeeping: MIG instances, time-slice replicas, fractional shares, bind/unbind."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.placement import (
    GPU,
    GPU_SHARED,
    Cluster,
    DeviceSlot,
    FragmentMeter,
    MostAllocated,
    NodeSpec,
    Placement,
    PodSpec,
    Shape,
    ShapeMix,
    Unschedulable,
    mig_resource,
)

GI = 1 << 30
MIG_NODE = NodeSpec("m", 16000, 64 * GI, 2, "A100", mig=(("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"), ()))


def test_allocatable_lists_mig_profiles_and_the_remaining_full_card() -> None:
    assert MIG_NODE.allocatable() == {
        "cpu": 16000,
        "memory": 64 * GI,
        GPU: 1,
        mig_resource("3g.40gb"): 1,
        mig_resource("2g.20gb"): 1,
        mig_resource("1g.10gb"): 2,
    }


def test_mig_instances_are_handed_out_in_layout_order_and_returned() -> None:
    cluster = Cluster([MIG_NODE])
    small = [PodSpec(f"s{i}", 100, GI, gpus=1, mig_profile="1g.10gb") for i in range(3)]
    got = [cluster.place(p) for p in small]
    assert [g.devices for g in got[:2] if isinstance(g, Placement)] == [
        (DeviceSlot(0, 1000, "nvidia.com/mig-1g.10gb", 2),),
        (DeviceSlot(0, 1000, "nvidia.com/mig-1g.10gb", 3),),
    ]
    assert isinstance(got[2], Unschedulable)
    assert got[2].message == "0/1 nodes are available: 1 Insufficient nvidia.com/mig-1g.10gb."
    cluster.unbind("s0")
    again = cluster.place(PodSpec("s3", 100, GI, gpus=1, mig_profile="1g.10gb"))
    assert isinstance(again, Placement) and again.devices[0].instance == 2
    # the full card beside the MIG card still takes a whole-card pod
    whole = cluster.place(PodSpec("w", 100, GI, gpus=1))
    assert isinstance(whole, Placement) and whole.devices == (DeviceSlot(1),)


def test_time_slice_replicas_are_distributed_over_cards() -> None:
    node = NodeSpec("t", 8000, 32 * GI, 2, "L4", timeslice_replicas=4)
    assert node.allocatable()[GPU] == 8
    cluster = Cluster([node])
    cards = []
    for i in range(8):
        decision = cluster.place(PodSpec(f"p{i}", 100, GI, gpus=1))
        assert isinstance(decision, Placement)
        cards.append((decision.devices[0].gpu, decision.devices[0].instance, decision.devices[0].milli))
    assert cards == [
        (0, 0, 250),
        (1, 0, 250),
        (0, 1, 250),
        (1, 1, 250),
        (0, 2, 250),
        (1, 2, 250),
        (0, 3, 250),
        (1, 3, 250),
    ]
    ninth = cluster.place(PodSpec("p8", 100, GI, gpus=1))
    assert isinstance(ninth, Unschedulable) and "1 Insufficient nvidia.com/gpu" in ninth.message


def test_renamed_shared_resource_only_serves_pods_that_ask_for_it() -> None:
    node = NodeSpec("t", 8000, 32 * GI, 1, "L4", timeslice_replicas=2, rename_shared=True)
    assert node.allocatable()[GPU_SHARED] == 2
    cluster = Cluster([node])
    plain = cluster.schedule(PodSpec("plain", gpus=1))
    assert isinstance(plain, Unschedulable) and "Insufficient nvidia.com/gpu." in plain.message
    assert isinstance(cluster.schedule(PodSpec("shared", gpus=1, shared_name=True)), Placement)


def test_fractional_share_needs_a_full_card_not_a_time_sliced_one() -> None:
    cluster = Cluster([NodeSpec("t", 8000, 32 * GI, 1, "L4", timeslice_replicas=2)])
    decision = cluster.schedule(PodSpec("f", gpu_milli=300))
    assert isinstance(decision, Unschedulable) and "Insufficient gpu-milli" in decision.message


def test_fragment_measure_by_hand() -> None:
    """Mix: half 1-card pods, half 300-milli shares (2 CPUs each). A node with frees
    (200, 700, 1000) and 4 CPUs free, total 1900 idle:
      1-card pods fit (one whole card free): fragment = cards partly taken = 200 + 700 = 900;
      300-milli pods fit: fragment = cards with < 300 free = 200.
    Expected = 0.5*900 + 0.5*200 = 550. With 1 CPU free neither fits: 0.5*1900 + 0.5*1900."""
    mix = ShapeMix.of([Shape(2000, gpus=1), Shape(2000, gpu_milli=300)])
    meter = FragmentMeter(mix)
    assert meter.fragment("A100", 4000, GI, (200, 700, 1000)) == 550.0
    assert meter.fragment("A100", 1000, GI, (200, 700, 1000)) == 1900.0
    # a model the 1-card pods may not use: all its idle capacity is fragment for them
    only_t4 = FragmentMeter(ShapeMix.of([Shape(2000, gpus=1, models=("T4",)), Shape(2000, gpu_milli=300)]))
    assert only_t4.fragment("A100", 4000, GI, (200, 700, 1000)) == 0.5 * 1900 + 0.5 * 200


@pytest.mark.parametrize(
    ("cpu_free", "mem_free", "expected"),
    [
        pytest.param(4000, 16 * GI, 0.5 * 900 + 0.5 * 200, id="both-fit"),
        pytest.param(4000, 4 * GI, 0.5 * 1900 + 0.5 * 200, id="1-card-pod-lacks-memory"),
        pytest.param(4000, GI, 1900.0, id="neither-has-the-memory"),
        pytest.param(1000, 16 * GI, 1900.0, id="neither-has-the-cpu"),
    ],
)
def test_fragment_measure_checks_memory_like_cpu(cpu_free: int, mem_free: int, expected: float) -> None:
    """Mix: half 1-card pods asking 8 GiB, half 300-milli shares asking 2 GiB (2 CPUs each). Node
    frees (200, 700, 1000), 1900 idle. A typical pod that fits strands the cards it cannot use (900
    for the 1-card pod, the 200 card for the share); one that lacks CPU or memory strands all 1900."""
    mix = ShapeMix.of([Shape(2000, gpus=1, memory=8 * GI), Shape(2000, gpu_milli=300, memory=2 * GI)])
    assert FragmentMeter(mix).fragment("A100", cpu_free, mem_free, (200, 700, 1000)) == expected


def test_shape_mix_keeps_the_most_frequent_shapes_up_to_coverage() -> None:
    shapes = [Shape(1000, gpus=1)] * 6 + [Shape(1000, gpu_milli=500)] * 3 + [Shape(1000, gpus=8)]
    mix = ShapeMix.of(shapes, coverage=0.9)
    assert mix.shapes == ((Shape(1000, gpus=1), 6 / 9), (Shape(1000, gpu_milli=500), 3 / 9))


requests = st.lists(
    st.tuples(
        st.integers(0, 4000),
        st.sampled_from([0, 1, 2, 4]),
        st.sampled_from([0, 0, 250, 500, 900]),
        st.booleans(),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(requests)
def test_bind_unbind_never_overcommits_and_restores_state(asks: list[tuple[int, int, int, bool]]) -> None:
    nodes = [NodeSpec(f"n{i}", 8000, 16 * GI, 4, "A100") for i in range(3)]
    cluster = Cluster(nodes, MostAllocated())
    placed = []
    for i, (cpu, gpus, share, release) in enumerate(asks):
        pod = PodSpec(f"p{i}", cpu, GI, gpus=0 if share else gpus, gpu_milli=share)
        decision = cluster.place(pod)
        if isinstance(decision, Placement):
            placed.append(pod.name)
            if release:
                cluster.unbind(placed.pop())
        for node in cluster.nodes:
            assert node.cpu_free >= 0 and node.mem_free >= 0
            assert all(0 <= f <= 1000 for f in node.free)
            held = sum(d.milli for _, devs in node.bound.values() for d in devs)
            assert held == 4000 - sum(node.free)
    for name in placed:
        cluster.unbind(name)
    for node in cluster.nodes:
        assert (node.cpu_free, node.mem_free, node.free) == (8000, 16 * GI, [1000] * 4)
