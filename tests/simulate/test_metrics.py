"""Each metric on small runs whose answer is worked out by hand below."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.simulate.config import Mode, PodsReady, ServingCurve, SimulationConfig
from gpufleet.simulate.jobs import JobRun
from gpufleet.simulate.metrics import (
    MOST_PREEMPTED,
    fair_jain,
    fair_shares,
    jain,
    most_preempted,
    percentile,
    wait_stats,
)
from gpufleet.simulate.requests import Ask
from gpufleet.simulate.run import simulate
from tests.simulate.fleets import FLAT, MIG_SPREAD, SERVING_AT_RISK, TWO_TEAMS, fleet, job


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        ([7], 50, 7),
        ([0, 1800], 50, 0),  # ceil(0.5·2) = 1st
        ([0, 1800], 95, 1800),  # ceil(0.95·2) = 2nd
        ([5, 1, 4, 2, 3], 50, 3),  # ceil(2.5) = 3rd of 1..5
        (list(range(1, 21)), 95, 19),  # ceil(19.0) = 19th
        (list(range(1, 21)), 96, 20),  # ceil(19.2) = 20th
    ],
    ids=["one", "two-p50", "two-p95", "five-p50", "twenty-p95", "twenty-p96"],
)
def test_percentile_is_nearest_rank(values: list[int], p: int, expected: int) -> None:
    assert percentile(values, p) == expected


def test_wait_stats_of_nothing_are_null() -> None:
    assert wait_stats([]) == {"p50": None, "p95": None, "max": None}


@pytest.mark.parametrize(
    ("demand", "weights", "total", "expected"),
    [
        ({"a": 10, "b": 10}, {"a": 1, "b": 1}, 10, {"a": 5, "b": 5}),  # both want more: split by weight
        ({"a": 10, "b": 10}, {"a": 2, "b": 1}, 9, {"a": 6, "b": 3}),
        ({"a": 2, "b": 10}, {"a": 1, "b": 1}, 10, {"a": 2, "b": 8}),  # a asked less than half: b the rest
        ({"a": 2, "b": 3}, {"a": 1, "b": 1}, 10, {"a": 2, "b": 3}),  # more than asked: each its demand
        ({"a": 1, "b": 4, "c": 10}, {"a": 1, "b": 1, "c": 2}, 9, {"a": 1, "b": 8 / 3, "c": 16 / 3}),
        ({"a": 5, "z": 5}, {"a": 1, "z": 0}, 4, {"a": 4, "z": 0}),  # weight 0: only what is idle
    ],
    ids=["equal", "weighted", "capped", "all-met", "three-levels", "weight-zero"],
)
def test_fair_shares_fill_by_weight_up_to_demand(
    demand: dict[str, float], weights: dict[str, float], total: float, expected: dict[str, float]
) -> None:
    assert fair_shares(demand, weights, total) == pytest.approx(expected)


TEAMS = ["a", "b", "c", "d"]


@given(
    st.lists(st.floats(min_value=0, max_value=1e6), min_size=4, max_size=4),
    st.lists(st.integers(min_value=1, max_value=8), min_size=4, max_size=4),
    st.floats(min_value=0, max_value=4e6),
)
def test_fair_shares_are_max_min_fair(asked: list[float], weight: list[int], total: float) -> None:
    """Never more than asked; all of ``total`` handed out unless every demand is met; and no team
    left below its demand holds less per weight than any other team (max-min fairness by weight)."""
    demand, weights = dict(zip(TEAMS, asked, strict=True)), dict(zip(TEAMS, map(float, weight), strict=True))
    shares = fair_shares(demand, weights, total)
    assert all(-1e-6 <= shares[t] <= demand[t] * (1 + 1e-9) + 1e-6 for t in TEAMS)
    assert sum(shares.values()) == pytest.approx(min(total, sum(asked)), rel=1e-9, abs=1e-6)
    for short in (t for t in TEAMS if shares[t] < demand[t] - 1e-6):
        assert all(shares[short] / weights[short] >= shares[t] / weights[t] - 1e-6 for t in TEAMS)


def test_fair_jain_is_one_when_each_got_what_it_asked_and_falls_when_one_is_short() -> None:
    weights = {"a": 1.0, "b": 1.0}
    assert fair_jain({"a": 2, "b": 8}, {"a": 2, "b": 20}, weights) == 1.0  # a got all it asked
    x = (1 / 5, 9 / 5)  # a asked 10 but got 1 of the 10 served, fair 5 each
    assert fair_jain({"a": 1, "b": 9}, {"a": 10, "b": 20}, weights) == pytest.approx(4 / (2 * (x[0] ** 2 + x[1] ** 2)))
    assert fair_jain({"a": 0, "b": 0}, {"a": 1, "b": 1}, weights) is None


@pytest.mark.parametrize(
    ("values", "expected"),
    [([1.0, 1.0, 1.0], 1.0), ([1.0, 0.0], 0.5), ([5 / 3, 1 / 3], 4 / (2 * (25 / 9 + 1 / 9))), ([0.0, 0.0], None)],
    ids=["equal", "one-gets-all", "five-to-one", "all-zero"],
)
def test_jain_index(values: list[float], expected: float | None) -> None:
    assert jain(values) == (None if expected is None else pytest.approx(expected))


@given(st.lists(st.floats(min_value=0.01, max_value=100), min_size=1, max_size=20))
def test_jain_index_lies_between_one_over_n_and_one(values: list[float]) -> None:
    j = jain(values)
    assert j is not None
    assert 1 / len(values) - 1e-9 <= j <= 1 + 1e-9


def two_teams_queue() -> dict:
    """Queue world on TWO_TEAMS (two cards, a and b guaranteed one each, one serving card):

    - j1 (a, 2 GPUs, 3600 s) at 0 borrows b's card; admitted and running at 0.
    - j2 (b, 1 GPU, 1800 s) at 600 reclaims it: j1 is preempted at 600; its pods hold both cards
      for the 30 s grace period (2 GPUs × 630 s lost), while Kueue releases its quota a second after
      the eviction, so j2 is admitted at 601, its pod waits for a card, and it runs 630–2430.
    - j3 (a, 1 GPU, 600 s) at 700 fits a's own card: runs 700–1300 (j1, back in the queue at
      601 and ahead of it, needs two).
    - j1 is admitted again one requeue batch (1 s) after j2 finishes: runs 2431–6031. The run ends
      at 6031.
    """
    result = simulate(
        fleet(TWO_TEAMS),
        [job("j1", "a", 0, 3600, gpus=2), job("j2", "b", 600, 1800), job("j3", "a", 700, 600)],
        SimulationConfig(serving=FLAT, finish_delay_s=0),
    )
    return result.summary


def test_waits_per_team_by_hand() -> None:
    s = two_teams_queue()
    # j1 waited 600 → 2431 after its preemption, j2 the 30 s grace period, j3 not at all.
    assert s["teams"]["a"]["waitSeconds"] == {"p50": 0, "p95": 1831, "max": 1831}
    assert s["teams"]["b"]["waitSeconds"] == {"p50": 30, "p95": 30, "max": 30}
    # [0, 30, 1831]: p50 is the ceil(1.5) = 2nd, p95 the ceil(2.85) = 3rd.
    assert s["kinds"]["training"]["waitSeconds"] == {"p50": 30, "p95": 1831, "max": 1831}


def test_gpu_hours_share_and_jain_by_hand() -> None:
    s = two_teams_queue()
    # a: j1 2×630 + 2×3600 and j3 600 GPU-seconds = 9060 s = 2.517 h; b: j2 1800 s = 0.5 h.
    assert s["teams"]["a"]["gpuHours"] == pytest.approx(9060 / 3600, abs=1e-3)
    assert s["teams"]["b"]["gpuHours"] == 0.5
    # share of a: 9060 / 10860 = 0.8343
    assert s["teams"]["a"]["share"] == pytest.approx(9060 / 10860, abs=1e-4)
    assert s["teams"]["b"]["weightShare"] == 0.5
    # shares over the fair shares of the 10860 GPU-s held: b asked 1800 (j2) and gets all of it; a asked
    # 2×3600 + 600 = 7800 and held 9060 (its preempted first run included): x = (9060/7800, 1), so
    # (x + 1)² / (2 · (x² + 1)) = 0.9944; share / weight share alone would say 0.6911.
    x = 9060 / 7800
    assert s["fleet"]["jainIndex"] == pytest.approx((x + 1) ** 2 / (2 * (x**2 + 1)), abs=1e-4)


def test_utilization_and_idle_while_waiting_by_hand() -> None:
    s = two_teams_queue()
    f = s["fleet"]
    assert s["endSeconds"] == 6031
    # 3 cards × 6031 s; held: 9060 + 1800 (b) + 6031 (the serving replica) = 16891 s.
    assert f["capacityGpuHours"] == pytest.approx(3 * 6031 / 3600, abs=1e-3)
    assert f["allocatedGpuHours"] == pytest.approx(16891 / 3600, abs=1e-3)
    assert f["utilization"] == pytest.approx(16891 / 18093, abs=1e-4)
    # Work waits 600–2430: no card idle 600–630 (j1's pods terminate on two), one 630–700, none
    # 700–1300, one 1300–2430: 70 + 1130 = 1200 GPU-seconds.
    assert f["idleGpuHoursWhileWaiting"] == pytest.approx(1200 / 3600, abs=1e-3)


def test_preemptions_and_work_lost_by_hand() -> None:
    s = two_teams_queue()
    assert s["fleet"]["preemptions"] == 1
    assert s["teams"]["a"]["preemptions"] == 1
    # j1 ran 0–600 on two cards and held them through the 30 s grace period.
    assert s["fleet"]["workLostGpuHours"] == pytest.approx(1260 / 3600, abs=1e-3)
    # b's j2 reclaimed the card a had borrowed.
    assert s["fleet"]["jobsPreempted"] == 1
    assert s["fleet"]["mostPreempted"] == [
        {
            "job": "a/j1",
            "team": "a",
            "kind": "training",
            "preemptions": 1,
            "workLostGpuHours": 0.35,
            "byReason": {"InCohortReclamation": 1},
            "byTeam": {"b": 1},
        }
    ]


def test_serving_starved_replica_minutes_by_hand() -> None:
    """SERVING_AT_RISK, first apply, one serving replica in hour 0 and four after.

    t1 (2 GPUs) at 0: a stock kube-scheduler scores cpu and memory only (LeastAllocated), and the
    pods request neither (counted as 100m / 200 MiB): n1 and s1 both score 99, BalancedAllocation
    skips a pod without requests, so the tie goes to n1 by name. t2 at 60 can only take s1, beside
    the one serving replica. At 3600 serving wants 4 replicas, one card is free: two replicas starve
    until t2 finishes at 7260 → 2 × 3660 s = 122 replica-minutes.
    Wanted: 60 min × 1 + (7260 − 3600) s × 4 = 304 replica-minutes.
    """
    curve = ServingCurve(hourly=(0.25,) + (1.0,) * 23)
    jobs = [job("t1", "a", 0, 7200, gpus=2), job("t2", "a", 60, 7200, gpus=2)]
    result = simulate(fleet(SERVING_AT_RISK), jobs, SimulationConfig(mode=Mode.FIRST_APPLY, serving=curve))
    assert result.summary["serving"]["starvedReplicaMinutes"] == 122.0
    assert result.summary["serving"]["wantedReplicaMinutes"] == 304.0
    assert [row["nodes"] for row in result.rows] == ["n1", "s1"]


def test_admitted_but_unplaced_hours_by_hand() -> None:
    """MIG_SPREAD: a pod asking for two 3g.40gb instances fits the quota (2) but no node (one each).

    Admitted at 0, evicted at 1800 (timeout), requeued after 60 s, admitted at 1860, evicted at
    3660; with backoffLimitCount 1 the second eviction deactivates it. Unplaced: 2 × 1800 s = 1 h.
    """
    config = SimulationConfig(pods_ready=PodsReady(backoff_limit=1))
    result = simulate(fleet(MIG_SPREAD), [job("c", "a", 0, 600, gpus=2, mig="3g.40gb")], config)
    f = result.summary["fleet"]
    assert f["admittedUnplacedHours"] == 1.0
    assert f["podsReadyEvictions"] == 2
    assert f["deactivated"] == 1
    run = result.outcome.runs[0]
    assert [(a.reserved, a.ended, a.end_detail) for a in run.attempts] == [
        (0, 1800, "PodsReadyTimeout"),
        (1860, 3660, "PodsReadyTimeout"),
    ]


def test_team_gpu_hours_add_up_to_the_jobs() -> None:
    """The meter's per-team integral and the per-job sums are computed apart; they must agree."""
    s = two_teams_queue()
    assert s["fleet"]["gpuHours"] == pytest.approx(s["teams"]["a"]["gpuHours"] + s["teams"]["b"]["gpuHours"])
    assert s["fleet"]["allocatedGpuHours"] == pytest.approx(s["fleet"]["gpuHours"] + s["serving"]["gpuHours"], abs=1e-3)


def test_most_preempted_order_is_count_then_work_lost_then_name() -> None:
    """Seven jobs: (preemptions, GPU-seconds lost). Ties on count go to more work lost, then the name;
    jobs never preempted are left out, and only the first MOST_PREEMPTED are kept."""
    table = {"g": (3, 0), "b": (3, 7200), "a": (3, 7200), "c": (9, 0), "d": (1, 0), "e": (0, 0), "f": (2, 3600)}
    runs = []
    for i, (name, (count, lost)) in enumerate(table.items()):
        run = JobRun(job(name, "t", 0, 60), Ask("nvidia.com/gpu", 1), i)
        run.preemptions, run.work_lost = count, float(lost)
        runs.append(run)
    assert [e["job"] for e in most_preempted(runs)] == ["t/c", "t/a", "t/b", "t/g", "t/f"][:MOST_PREEMPTED]
    assert most_preempted(runs)[1]["workLostGpuHours"] == 2.0
