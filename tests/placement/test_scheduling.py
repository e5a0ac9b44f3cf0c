"""Which node each pod lands on, under each policy, on a 3-node cluster worked out by hand."""

from __future__ import annotations

import pytest

from gpufleet.placement import (
    Cluster,
    FragmentationAware,
    LeastAllocated,
    MostAllocated,
    NodeSpec,
    Operator,
    Placement,
    PodSpec,
    Policy,
    Requirement,
    Shape,
    ShapeMix,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
    Unschedulable,
)

GI = 1 << 30
SERVING = Taint("dedicated", "serving")


def three_nodes() -> list[NodeSpec]:
    """a and b: training nodes with 4 full A100s; c: a serving node, tainted."""
    train = (("pool", "train"),)
    return [
        NodeSpec("a", 8000, 32 * GI, 4, "A100", labels=train),
        NodeSpec("b", 8000, 32 * GI, 4, "A100", labels=train),
        NodeSpec("c", 8000, 32 * GI, 4, "H100", labels=(("pool", "serve"),), taints=(SERVING,)),
    ]


def cluster_with_b_half_used(policy: Policy) -> Cluster:
    cluster = Cluster(three_nodes(), policy)
    first = PodSpec("first", 2000, 8 * GI, gpus=2)
    cluster.bind(first, Placement("first", "b", cluster.node("b").devices_for(first)))
    return cluster


# One pod asking 1 card, 1 CPU, 4 GiB. c is ruled out by its taint. b holds 2 cards, 2 CPUs and 8 GiB.
# kube-scheduler v1.36.5's scores (framework/plugins/noderesources, integer arithmetic):
#   LeastAllocated (stock: Fit over cpu and memory, plus BalancedAllocation; the GPU is not scored):
#     Fit      a = (7000*100//8000 + 28*100//32)//2 = (87+87)//2 = 87;  b = (62+62)//2 = 62
#     Balanced a = 50 + (50 + 100 - 100)/2 = 75 (cpu and memory fractions equal before and after); b = 75
#     -> a 162, b 137: a
#   MostAllocated (render's profile: Fit over the GPU, cpu and memory, plus BalancedAllocation):
#     Fit      a = (1000*100//4000 + 12 + 12)//3 = (25+12+12)//3 = 16;  b = (75+37+37)//3 = 49
#     -> a 91, b 124: b
@pytest.mark.parametrize(
    ("policy", "node"),
    [(LeastAllocated(), "a"), (MostAllocated(), "b")],
    ids=["least-allocated-spreads", "most-allocated-packs"],
)
def test_policy_picks_node(policy: Policy, node: str) -> None:
    cluster = cluster_with_b_half_used(policy)
    decision = cluster.schedule(PodSpec("p", 1000, 4 * GI, gpus=1))
    assert isinstance(decision, Placement)
    assert decision.node == node


@pytest.mark.parametrize(
    ("policy", "node", "score"),
    [
        (LeastAllocated(), "a", 162),
        (LeastAllocated(), "b", 137),
        (MostAllocated(), "a", 91),
        (MostAllocated(), "b", 124),
    ],
)
def test_scores_match_kube_arithmetic(policy: Policy, node: str, score: int) -> None:
    cluster = cluster_with_b_half_used(policy)
    assert policy.key(cluster.node(node), PodSpec("p", 1000, 4 * GI, gpus=1)) == (-float(score),)


# Hand-computed against kube-scheduler v1.36.5 on one node of 8 CPU, 32 GiB, 4 cards:
#   a pod with no cpu/memory request counts 100m / 200 MiB in Fit (NonZeroRequested), and is skipped
#   by BalancedAllocation (best effort): Fit least = ((8000-100)*100//8000 + (32Gi-200Mi)*100//32Gi)//2
#   = (98+99)//2 = 98. MostAllocated adds the GPU: (1000*100//4000 + 1 + 0)//3 = 8.
#   A cpu-only pod of 6 CPUs on an empty node: fractions (0.75, 0) -> std 0.375 -> int(62.5) = 62;
#   balanced = 50 + (50 + 62 - 100)/2 = 50 + 12/2 = 56; Fit least = (25 + 99)//2 = 62 (memory 200 MiB).
@pytest.mark.parametrize(
    ("policy", "pod", "score"),
    [
        (LeastAllocated(), PodSpec("bare", gpus=1), 98),
        (MostAllocated(), PodSpec("bare", gpus=1), 8),
        (LeastAllocated(), PodSpec("cpu", 6000), 62 + 56),
        # memory 7/8 used by another pod: before (0, 0.875) s=56, after (0.75, 0.875) s=93 -> 50 + (50+93-56)/2 = 93
        (LeastAllocated(), PodSpec("late-cpu", 6000), None),
    ],
    ids=["least-unrequested", "most-unrequested", "least-cpu-only", "balancing-pod"],
)
def test_default_requests_and_balance_follow_kube_scheduler(policy: Policy, pod: PodSpec, score: int | None) -> None:
    node = NodeSpec("n", 8000, 32 * GI, 4, "A100")
    cluster = Cluster([node], policy)
    if score is None:  # memory already 7/8 used: the cpu-heavy pod makes the node more balanced
        hog = PodSpec("hog", 1, 28 * GI)
        cluster.bind(hog, Placement("hog", "n", ()))
        fit = ((8000 - 100 - 6000) * 100 // 8000 + (32 * GI - 28 * GI - 200 * (1 << 20)) * 100 // (32 * GI)) // 2
        score = fit + 93
    assert policy.key(cluster.node("n"), pod) == (-float(score),)


def test_an_unbalancing_pod_scores_balance_lost_against_the_empty_node() -> None:
    """A pod of 7.5 CPUs and 1 byte on an empty node: Fit least (500*100//8000 + 99)//2 = 52; balance
    with the pod: fractions (0.9375, ~0), std 0.46875, int(53.125) = 53; without: 100; so
    50 + (50 + 53 - 100) // 2 = 51. (The numerator never goes negative: two fractions in [0, 1] have a
    std of at most 0.5, so Go's truncating division and Python's floor agree.)"""
    cluster = Cluster([NodeSpec("n", 8000, 32 * GI, 0, "")], LeastAllocated())
    assert LeastAllocated().key(cluster.node("n"), PodSpec("p", 7500, 1)) == (-103.0,)


def test_whole_cards_skip_the_cards_already_held() -> None:
    cluster = cluster_with_b_half_used(MostAllocated())
    decision = cluster.place(PodSpec("p", 1000, 4 * GI, gpus=2))
    assert isinstance(decision, Placement)
    assert (decision.node, [d.gpu for d in decision.devices]) == ("b", [2, 3])


def test_equal_scores_break_ties_by_node_name() -> None:
    nodes = [NodeSpec(n, 4000, 8 * GI, 2, "L4") for n in ("n3", "n1", "n2")]
    decision = Cluster(nodes, LeastAllocated()).schedule(PodSpec("p", 100, GI, gpus=1))
    assert isinstance(decision, Placement) and decision.node == "n1"


def test_fragmentation_aware_fills_the_half_used_card() -> None:
    """Workload: whole-card pods only. A 500-milli share on empty a would strand 500 milli that no
    whole-card pod can use (fragment 0 -> 500, +500); on b's card 0, already half taken, it uses up
    the stranded half (fragment 500 -> 0, -500); on b's card 1 it would strand another half (+500).
    So: b, card 0 — where LeastAllocated would pick a."""
    mix = ShapeMix.of([Shape(cpu_milli=1000, gpus=1)])
    nodes = three_nodes()
    for policy, node, card in [(FragmentationAware(mix), "b", 0), (LeastAllocated(), "a", 0)]:
        cluster = Cluster(nodes, policy)
        half = PodSpec("half", 100, GI, gpu_milli=500)
        cluster.bind(half, Placement("half", "b", cluster.node("b").devices_for(half, 0)))
        decision = cluster.schedule(PodSpec("p", 100, GI, gpu_milli=500))
        assert isinstance(decision, Placement)
        assert (decision.node, decision.devices[0].gpu, decision.devices[0].milli) == (node, card, 500)


@pytest.mark.parametrize(
    ("pod", "node"),
    [
        (
            PodSpec(
                "sel",
                100,
                GI,
                gpus=1,
                node_selector=(("pool", "serve"),),
                tolerations=(Toleration("dedicated", "serving"),),
            ),
            "c",
        ),
        (
            PodSpec(
                "any-taint",
                100,
                GI,
                gpus=1,
                affinity=((Requirement("pool", Operator.IN, ("serve",)),),),
                tolerations=(Toleration(operator=TolerationOperator.EXISTS),),
            ),
            "c",
        ),
        (
            PodSpec("notin", 100, GI, gpus=1, affinity=((Requirement("pool", Operator.NOT_IN, ("serve",)),),)),
            "a",
        ),
        (PodSpec("exists", 100, GI, gpus=1, affinity=((Requirement("pool", Operator.EXISTS),),)), "a"),
        # two terms are ORed: the first matches nothing, the second matches c
        (
            PodSpec(
                "or",
                100,
                GI,
                gpus=1,
                tolerations=(Toleration("dedicated", operator=TolerationOperator.EXISTS),),
                affinity=(
                    (Requirement("pool", Operator.IN, ("nowhere",)),),
                    (
                        Requirement("pool", Operator.IN, ("serve",)),
                        Requirement("zone", Operator.DOES_NOT_EXIST),
                    ),
                ),
            ),
            "c",
        ),
    ],
    ids=["selector-and-toleration", "exists-toleration", "not-in", "exists", "terms-ored"],
)
def test_filters_steer_pods(pod: PodSpec, node: str) -> None:
    decision = Cluster(three_nodes(), LeastAllocated()).schedule(pod)
    assert isinstance(decision, Placement) and decision.node == node


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (
            PodSpec("big", 100, GI, gpus=8),
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: serving}, "
            "2 Insufficient nvidia.com/gpu.",
        ),
        (
            PodSpec("serve-only", 100, GI, gpus=1, node_selector=(("pool", "serve"),)),
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: serving}, "
            "2 node(s) didn't match Pod's node affinity/selector.",
        ),
        (
            PodSpec("fat", 9000, 40 * GI, gpus=1, tolerations=(Toleration(operator=TolerationOperator.EXISTS),)),
            "0/3 nodes are available: 3 Insufficient cpu, 3 Insufficient memory.",
        ),
        (
            PodSpec(
                "wrong-effect",
                100,
                GI,
                gpus=8,
                tolerations=(Toleration("dedicated", "serving", effect=None),),
            ),
            "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        ),
    ],
    ids=["gpus-and-taint", "selector-and-taint", "cpu-and-memory-everywhere", "tolerated-taint"],
)
def test_unschedulable_message_reads_like_kube_scheduler(pod: PodSpec, message: str) -> None:
    decision = Cluster(three_nodes()).schedule(pod)
    assert isinstance(decision, Unschedulable)
    assert decision.reason == "Unschedulable"
    assert decision.message == message


def test_reasons_follow_the_free_state_as_pods_come_and_go() -> None:
    """The remembered per-group answers follow a node into its new group: with a's cards taken
    and half of b's, a 4-card pod lacks cards on both; once a's are back it lands there, and with
    them taken again it gets the same reasons."""
    cluster = Cluster(three_nodes())
    taker = PodSpec("taker", 100, GI, gpus=4)
    cluster.bind(taker, Placement("taker", "a", cluster.node("a").devices_for(taker)))
    cluster.bind(PodSpec("half", 100, GI, gpus=2), Placement("half", "b", cluster.node("b").devices_for(taker)[:2]))
    wants = PodSpec("wants", 100, GI, gpus=4)
    first = cluster.schedule(wants)
    assert isinstance(first, Unschedulable)
    assert first.message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: serving}, 2 Insufficient nvidia.com/gpu."
    )
    cluster.unbind("taker")
    assert cluster.schedule(wants) == Placement("wants", "a", cluster.node("a").devices_for(wants))
    cluster.bind(taker, Placement("taker", "a", cluster.node("a").devices_for(taker)))
    again = cluster.schedule(PodSpec("wants-again", 100, GI, gpus=4))
    assert isinstance(again, Unschedulable)
    assert again.message == first.message


def test_prefer_no_schedule_taint_does_not_filter() -> None:
    soft = Taint("spot", "true", TaintEffect.PREFER_NO_SCHEDULE)
    decision = Cluster([NodeSpec("s", 1000, GI, 1, taints=(soft,))]).schedule(PodSpec("p", gpus=1))
    assert isinstance(decision, Placement)


def test_unbind_gives_everything_back() -> None:
    cluster = Cluster(three_nodes(), MostAllocated())
    pod = PodSpec("p", 3000, 4 * GI, gpus=3)
    first = cluster.place(pod)
    assert isinstance(first, Placement)
    assert cluster.unbind("p") == first
    assert cluster.node(first.node).free == [1000] * 4
    assert cluster.node(first.node).cpu_free == 8000
    again = cluster.place(pod)
    assert again == first


def test_fragmentation_aware_packs_when_fragmentation_ties() -> None:
    """Whole-card pods only. A 1-card pod leaves no partly used card on either node (fragment
    0 -> 0 on both), so the bands tie and the node left with less free GPU wins: y (1 card left)
    over x (3 left), though x sorts first by name."""
    mix = ShapeMix.of([Shape(cpu_milli=1000, gpus=1)])
    cluster = Cluster([NodeSpec(n, 8000, 32 * GI, 4, "A100") for n in ("x", "y")], FragmentationAware(mix))
    held = PodSpec("held", 1000, GI, gpus=2)
    cluster.bind(held, Placement("held", "y", cluster.node("y").devices_for(held)))
    decision = cluster.schedule(PodSpec("p", 1000, GI, gpus=1))
    assert isinstance(decision, Placement)
    assert (decision.node, [d.gpu for d in decision.devices]) == ("y", [2])


def test_fragmentation_aware_keeps_large_nodes_for_large_pods() -> None:
    """Whole-card pods only. l has 8 cards, 7 held whole; s has 4 free cards. A 1-card pod leaves
    no partly used card on either (fragment 0 -> 0), so the bands tie; the node with fewer cards
    wins: s, though l would be left with less free GPU (0 against 3) and sorts first by name."""
    mix = ShapeMix.of([Shape(cpu_milli=1000, gpus=1)])
    nodes = [NodeSpec("l", 64000, 256 * GI, 8, "A100"), NodeSpec("s", 32000, 128 * GI, 4, "A100")]
    cluster = Cluster(nodes, FragmentationAware(mix))
    held = PodSpec("held", 1000, GI, gpus=7)
    cluster.bind(held, Placement("held", "l", cluster.node("l").devices_for(held)))
    decision = cluster.schedule(PodSpec("p", 1000, GI, gpus=1))
    assert isinstance(decision, Placement) and decision.node == "s"


@pytest.mark.parametrize(
    ("typical_memory", "node"),
    [
        pytest.param(8 * GI, "b", id="memory-in-the-mix"),
        pytest.param(0, "a", id="memory-left-out"),
    ],
)
def test_fragmentation_aware_keeps_memory_for_the_typical_pod(typical_memory: int, node: str) -> None:
    """Typical pod: 1 card, 8 GiB. a and b have 2 free cards; a has 16 GiB, b 32 GiB. A 1-card pod
    asking 12 GiB leaves a with 4 GiB, too little for the typical pod, so a's last card becomes
    fragment (0 -> 1000, band 10), while b keeps 20 GiB (0 -> 0): b. With memory left out of the mix
    both stay at 0, the bands, card counts and GPU left tie, and the name picks a."""
    mix = ShapeMix.of([Shape(1000, gpus=1, memory=typical_memory)])
    nodes = [NodeSpec("a", 8000, 16 * GI, 2, "A100"), NodeSpec("b", 8000, 32 * GI, 2, "A100")]
    decision = Cluster(nodes, FragmentationAware(mix)).schedule(PodSpec("p", 1000, 12 * GI, gpus=1))
    assert isinstance(decision, Placement) and decision.node == node
