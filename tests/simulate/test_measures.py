"""Each measure on small runs whose answer is worked out by hand (docstrings give the arithmetic)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.policy import Fleet
from gpufleet.simulate.config import Mode, SimulationConfig
from gpufleet.simulate.measures import Measures, as_dict, common_window, measure
from gpufleet.simulate.result import RunResult
from gpufleet.simulate.run import assess, results_document, simulate
from gpufleet.trace.job import Job
from tests.simulate.fleets import FLAT, TWO_NODES, TWO_TEAMS, fleet, job, limited


def run(f: Fleet, jobs: list[Job], mode: Mode = Mode.QUEUE) -> RunResult:
    return simulate(f, jobs, SimulationConfig(mode=mode, serving=FLAT, finish_delay_s=0))


def gang() -> tuple[Fleet, list[Job]]:
    """TWO_NODES: A (one pod, 2 GPUs, 3600 s) and B (two pods of 2 GPUs, 1800 s), both at 0."""
    return fleet(TWO_NODES), [job("A", "a", 0, 3600, gpus=2), job("B", "a", 0, 1800, gpus=2, pods=2)]


def test_first_apply_counts_a_partial_gang_as_held_idle() -> None:
    """First apply: A binds n1; B's first pod binds n2, its sibling waits for A; B starts at 3600 and
    ends at 5400. B's first pod held 2 GPUs idle for 3600 s: 2 GPU-h held idle. Goodput: A 2 × 3600
    + B 4 × 1800 = 4 GPU-h; capacity 4 cards × 1.5 h = 6 GPU-h = goodput + held idle."""
    f, jobs = gang()
    m = measure(run(f, jobs, Mode.FIRST_APPLY), f, (0, 5400))
    assert (m.capacity_gpu_h, m.goodput_gpu_h, m.held_idle_gpu_h, m.lost_gpu_h) == (6.0, 4.0, 2.0, 0.0)
    assert m.usable_idle_gpu_h == {"train": 0.0}  # B's sibling never fits the free room of one node
    assert m.makespan_s == 5400


def test_the_queue_holds_the_gang_back_and_the_free_node_is_usable_idle() -> None:
    """Queue: quota 4; A holds 2, so B (4) is parked until A ends at 3600, wakes with Kueue's requeue
    batch at 3601 and binds both pods at once: no GPU held idle. Goodput in the window: A 2 × 3600 +
    B 4 × 1799 (3601–5400) = 14,396 GPU-s = 3.999 GPU-h. n2 sat free 0–3601 while B waited, and one
    B pod (2 GPUs) fits n2: 2 × 3601 GPU-s = 2.001 GPU-h usable idle on train."""
    f, jobs = gang()
    m = measure(run(f, jobs), f, (0, 5400))
    assert (m.goodput_gpu_h, m.held_idle_gpu_h, m.usable_idle_gpu_h) == (3.999, 0.0, {"train": 2.001})
    team = m.team("a")
    assert team is not None
    assert (team.wait_p50_s, team.wait_p95_s) == (0, 3601)  # A 0 s, B 3601 s
    assert (team.completion_p50_s, team.completion_p95_s) == (3600, 5401)


def reclaimed() -> tuple[Fleet, RunResult]:
    """TWO_TEAMS (test_metrics.two_teams_queue): j1 (a, 2 GPUs) runs 0–630 and is preempted at 600
    (its quota released at 601, its pods gone at 630), runs again 2431–6031 (parked, it wakes one
    requeue batch after j2's end); j2 (b, 1 GPU) admitted at 601, runs 630–2430; j3 (a, 1 GPU)
    700–1300."""
    f = fleet(TWO_TEAMS)
    return f, run(f, [job("j1", "a", 0, 3600, gpus=2), job("j2", "b", 600, 1800), job("j3", "a", 700, 600)])


def test_goodput_lost_waits_and_jain_by_hand() -> None:
    """Over the whole run (0–6031): goodput j1 2 × 3600 + j2 1800 + j3 600 = 9600 GPU-s; lost: j1's
    first run, 2 GPUs × 630 s = 1260 GPU-s = 0.35 GPU-h. Jain is over goodput ÷ the weighted max-min fair
    share of it (``fair_shares``): a asked 7800 GPU-s of work, b 1800, and both got all of it, so b's
    share is its 1800 and a's the rest: x = (1, 1), Jain 1 (goodput share over weight share would say
    0.72: a did more because it asked more). Cut at 1800 s, a could have worked 2 × 1800 + 600 and b
    1200 GPU-s there; they got a 600 (j3) and b 1170 (j2, 630–1800): 1770 GPU-s split 885 each,
    x = (600/885, 1170/885)."""
    f, result = reclaimed()
    m = measure(result, f, (0, 6031))
    assert m.goodput_gpu_h == pytest.approx(9600 / 3600, abs=1e-3)
    assert m.lost_gpu_h == 0.35
    assert m.held_idle_gpu_h == 0.0
    assert m.jain == 1.0
    assert measure(result, f, (0, 1800)).jain == pytest.approx(
        4 / (2 * ((600 / 885) ** 2 + (1170 / 885) ** 2)), abs=1e-4
    )
    assert (m.preemptions_max, m.preemptions_p95) == (1, 1)  # counts [0, 0, 1]: p95 is the 3rd
    a, b = m.team("a"), m.team("b")
    assert a is not None and b is not None
    assert (a.wait_p50_s, a.wait_p95_s, a.completion_p50_s, a.completion_p95_s) == (0, 1831, 600, 6031)
    assert (b.wait_p50_s, b.completion_p50_s) == (30, 1830)
    assert (a.lost_gpu_h, b.lost_gpu_h, a.preemptions) == (0.35, 0.0, 1)
    assert m.serving_gpu_h == pytest.approx(6031 / 3600, abs=1e-3)  # one replica all along


@pytest.mark.parametrize(
    ("window", "goodput_s", "lost_s", "capacity_h"),
    [
        ((0, 3000), 1800 + 600 + 2 * 569, 1260, 2.5),  # j1's second run counts 2431–3000
        ((0, 600), 0, 2 * 600, 0.5),  # nothing completed yet; j1's first run is lost up to 600
        ((1000, 2000), 1000 + 300, 0, 0.833),  # j2 1000–2000, j3 1000–1300
    ],
    ids=["to-3000", "to-600", "1000-2000"],
)
def test_every_figure_is_clipped_to_the_window(
    window: tuple[int, int], goodput_s: int, lost_s: int, capacity_h: float
) -> None:
    """The same run; capacity is 3 cards (two training, one serving) times the window."""
    f, result = reclaimed()
    m = measure(result, f, window)
    assert m.goodput_gpu_h == pytest.approx(goodput_s / 3600, abs=1e-3)
    assert m.lost_gpu_h == pytest.approx(lost_s / 3600, abs=1e-3)
    assert m.capacity_gpu_h == capacity_h
    assert m.window_s == window


def test_usable_idle_leaves_out_cards_no_waiting_job_can_use() -> None:
    """LIMITED with a's borrowing limit 0: a1 and a2 (1 GPU, 3600 s) at 0; a2 may not borrow b's idle
    card, so it is parked until a1 ends at 3600 and wakes with the requeue batch at 3601. That card is
    usable idle (1 GPU × 3601 s = 1.001 GPU-h); the MIG card, idle all along, is not: nobody waits for
    a MIG instance. With no limit a2 borrows the card and nothing is idle."""
    jobs = [job("a1", "a", 0, 3600), job("a2", "a", 0, 3600)]
    capped = limited("0")
    m = measure(run(capped, jobs), capped, (0, 7200))
    assert m.usable_idle_gpu_h == {"train": 1.001, "mig": 0.0}
    assert m.makespan_s == 7201  # a2 ends at 7201
    free = limited("unlimited")
    m = measure(run(free, jobs), free, (0, 3600))
    assert m.usable_idle_gpu_h == {"train": 0.0, "mig": 0.0}
    assert m.makespan_s == 3600


def test_never_admissible_jobs_are_counted_apart_from_the_waits() -> None:
    """TWO_TEAMS: a can reach 2 cards (1 nominal + b's 1); a 3-GPU job never gets in. The 2-GPU job
    runs 0–600. Its wait (0) is the team's only wait; makespan ends at its finish."""
    f = fleet(TWO_TEAMS)
    m = measure(run(f, [job("big", "a", 0, 3600, gpus=3), job("ok", "a", 0, 600, gpus=2)]), f, (0, 600))
    a = m.team("a")
    assert a is not None
    assert (a.jobs, a.finished, a.never_admissible, a.wait_p95_s) == (2, 1, 1, 0)
    assert (m.never_admissible, m.makespan_s) == (1, 600)


def test_the_common_window_ends_with_the_shortest_run_and_both_worlds_share_it() -> None:
    """The gang case: both worlds end at 5400. TWO_TEAMS: first apply ends at 5400 (j1 0–3600,
    then j2 and j3), the queue at 6031: the window is [0, 5400] and capacity is the same."""
    f = fleet(TWO_TEAMS)
    jobs = [job("j1", "a", 0, 3600, gpus=2), job("j2", "b", 600, 1800), job("j3", "a", 700, 600)]
    results = [run(f, jobs, Mode.FIRST_APPLY), run(f, jobs)]
    assert [r.outcome.end for r in results] == [5400, 6031]
    assert common_window(results) == (0, 5400)
    judged = assess(f, results)
    assert [a.measures.capacity_gpu_h for a in judged] == [4.5, 4.5]
    document = results_document(f, "hand", len(jobs), results, judged)
    assert document["window"] == {"startSeconds": 0, "endSeconds": 5400}
    assert list(document["measures"]) == ["first-apply", "queue"]
    assert document["measures"]["queue"] == as_dict(judged[1].measures)
    assert "runs" in document and document["runs"]["queue"]["fleet"]["preemptions"] == 1  # old figures kept


def test_as_dict_keeps_seconds_as_integers() -> None:
    f, result = reclaimed()
    d = as_dict(measure(result, f, (0, 6031)))
    assert d["windowSeconds"] == [0, 6031]
    assert d["makespanSeconds"] == 6031 and isinstance(d["makespanSeconds"], int)
    assert d["teams"]["a"]["waitSeconds"] == {"p50": 0, "p95": 1831}
    assert d["preemptionsPerJob"] == {"max": 1, "p95": 1}


def test_a_run_that_completes_later_counts_its_work_inside_the_window() -> None:
    """j runs 0–600 and finishes: over [0, 300] half of it is goodput; over [0, 0] nothing is, and
    Jain has no shares to compare."""
    f = fleet(TWO_TEAMS)
    result = run(f, [job("j", "a", 0, 600)])
    half: Measures = measure(result, f, (0, 300))
    assert (half.goodput_gpu_h, half.jain) == (0.083, 1.0)
    none = measure(result, f, (0, 0))
    assert (none.goodput_gpu_h, none.jain, none.capacity_gpu_h) == (0.0, None, 0.0)


job_specs = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.integers(0, 4).map(lambda k: k * 900),  # submit
        st.integers(1, 6).map(lambda k: k * 600),  # duration
        st.sampled_from([(1, 1), (2, 1), (1, 2)]),  # (GPUs per pod, pods)
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job_specs, st.sampled_from([Mode.QUEUE, Mode.FIRST_APPLY]))
def test_every_gpu_hour_a_job_held_is_goodput_held_idle_lost_or_still_running(
    specs: list[tuple[str, int, int, tuple[int, int]]], mode: Mode
) -> None:
    """Over the whole run, what the jobs' pods held (``fleet.gpuHours``, the older figure) splits
    exactly into goodput, held idle, lost, and the runs still going at the end; and goodput is never
    more than the work of the finished jobs (GPUs × duration)."""
    f = fleet(TWO_TEAMS)
    jobs = [job(f"j{i}", team, s, d, gpus=g, pods=p) for i, (team, s, d, (g, p)) in enumerate(specs)]
    result = run(f, jobs, mode)
    end = result.outcome.end
    m = measure(result, f, (0, end))
    running = sum(
        h.worth * ((h.released if h.released is not None else end) - a.started)
        for r in result.outcome.runs
        for a in r.attempts
        if a.started is not None and not a.end_reason
        for h in a.holds
    )
    held = result.summary["fleet"]["gpuHours"]
    assert m.goodput_gpu_h + m.held_idle_gpu_h + m.lost_gpu_h + running / 3600 == pytest.approx(held, abs=0.01)
    finished_work = sum(
        r.job.gpus * r.job.pods * r.job.duration_s for r in result.outcome.runs if r.state.value == "Finished"
    )
    assert m.goodput_gpu_h <= finished_work / 3600 + 0.001
    assert m.capacity_gpu_h == pytest.approx(3 * end / 3600, abs=0.001)  # two training cards and one serving
