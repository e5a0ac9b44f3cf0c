"""The audit questions on a hand-made history whose answers are known (SQLite; storage tested elsewhere)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpufleet.errors import InputError
from gpufleet.ledger import queries
from gpufleet.ledger import report as reports
from gpufleet.ledger.records import INFERRED_FROM_COUNT, EndReason
from gpufleet.ledger.store import Ledger
from tests.ledger.ledger_factories import allocation, at
from tests.ledger.ledger_scenario import history


@pytest.fixture
def filled(ledger: Ledger) -> Ledger:
    ledger.append(history())
    return ledger


@pytest.mark.parametrize(
    ("node", "minute", "device", "expected"),
    [
        ("h100-train-0", 20, None, [("train-big", 1)]),
        ("h100-train-1", 20, None, [("train-v", 1)]),
        ("h100-train-1", 45, None, [("train-a", 1)]),
        ("h100-train-1", 45, "2", [("train-a", 1)]),
        ("h100-train-1", 45, "7", []),  # device 7 was not part of that allocation
        ("h100-train-0", 80, "5", [("train-a", 2)]),  # devices unknown: listed, cannot be ruled out
        ("h100-train-0", 65, None, []),  # train-big finished at 65: end is exclusive
        ("h100-train-1", 50, None, []),  # preempted at 50
    ],
    ids=[
        "big",
        "vision",
        "attempt-1",
        "device-held",
        "device-free",
        "devices-unknown",
        "end-exclusive",
        "preempted",
    ],
)
def test_who_names_the_holders_of_a_node_at_an_instant(
    filled: Ledger, node: str, minute: int, device: str | None, expected: list[tuple[str, int]]
) -> None:
    found = queries.who(filled, node, at(minute), device)
    assert [(h.allocation.name, h.allocation.attempt) for h in found] == expected


def test_why_tells_each_wait_with_its_holders_then_each_attempt(filled: Ledger) -> None:
    e = queries.why(filled, "research", "train-a")
    assert [s.seconds for s in e.waits] == [30 * 60, 20 * 60]
    first_holders = [(h.name, h.team, h.gpus, h.borrowing) for h in e.waits[0].holders]
    assert first_holders == [("train-big", "research", 8, False), ("train-v", "vision", 4, True)]
    assert [h.name for h in e.waits[1].holders] == ["train-big"]
    assert [a.attempt for a in e.attempts] == [1, 2] and e.preemptions == 1
    text = "\n".join(queries.explain_text(e))
    assert "waited 30 min 00 s: WaitingForQuota" in text
    assert "research/train-big (team research, 8 GPU on h100-train, within its own quota)" in text
    assert "vision/train-v (team vision, 4 GPU on h100-train, borrowing from the cohort)" in text
    assert "ended Preempted (InCohortReclamation)" in text and "preempted 1 time." in text
    assert "[simulated run]" not in text
    assert queries.explain_json(e)["waits"][0]["heldBy"][1]["borrowing"] is True


def test_why_shows_an_inferred_attempt_as_not_observed(ledger: Ledger) -> None:
    # the recorder's record of an attempt only Kueue's eviction count proves (gpufleet.recorder.inference)
    unseen = allocation(
        attempt=1, cluster_queue="", flavors=(), gpu_resource="", gpu_count=0, placements=(), quota_reserved=None,
        admitted=None, started=None, end_reason=EndReason.PREEMPTED, end_detail=INFERRED_FROM_COUNT,
        end_message="attempt not observed by the recorder, inferred from Kueue's schedulingStats.evictions",
    )  # fmt: skip
    seen = allocation(attempt=2, quota_reserved=at(30), admitted=at(30), started=at(31))
    ledger.append([unseen, seen])
    e = queries.why(ledger, "research", "train-a")
    text = queries.explain_text(e)
    assert text[1].startswith("Attempt 1: NOT OBSERVED, inferred from Kueue's eviction count; ended Preempted:")
    assert text[2].startswith("Attempt 2: quota reserved at")
    assert "1 of its 2 attempts was not observed by the recorder" in text[-1]
    assert [a["observed"] for a in queries.explain_json(e)["attempts"]] == [False, True]
    assert queries.who(ledger, "h100-train-0", at(10)) == []  # no time claimed, so it held nothing then


def test_why_marks_a_simulated_run(ledger: Ledger) -> None:
    ledger.append([replace(r, simulated=True) for r in history()])
    assert "[simulated run]" in queries.explain_text(queries.why(ledger, "research", "train-a"))[0]


def test_why_for_an_unknown_workload_is_a_user_error(filled: Ledger) -> None:
    with pytest.raises(InputError, match="no workload research/nope"):
        queries.why(filled, "research", "nope")


def test_report_splits_gpu_hours_per_team_and_flavor_and_keeps_simulated_rows_apart(filled: Ledger) -> None:
    filled.append([allocation(workload_uid="sim-1", name="sim", quota_reserved=at(0), finished=at(60), simulated=True)])
    r = reports.report(filled, at(0), at(120), {"research": 2, "vision": 1})
    rows = {(row.team, row.flavor, row.simulated): row for row in r.rows}
    research = rows[("research", "h100-train", False)]
    # train-big 8 GPU × 60 min, train-a 4 GPU × (10 + 50 min inside the window)
    assert research.gpu_hours == pytest.approx(8 + 4 * 60 / 60)
    assert rows[("vision", "h100-train", False)].gpu_hours == pytest.approx(4 * 40 / 60, abs=1e-3)
    assert research.share == pytest.approx(12 / (12 + 4 * 40 / 60), abs=1e-4)
    assert research.weight_share == pytest.approx(2 / 3, abs=1e-4) and research.preemptions == 1
    assert research.wait_p50_s == research.wait_p95_s == 50 * 60  # one workload waited 30 + 20 min
    assert rows[("research", "h100-train", True)].gpu_hours == pytest.approx(8) and r.simulated
    assert r.incomplete == ()
    assert "simulated" in reports.to_html(r) and reports.to_csv(r).count("\n") == 4


def test_a_preemption_counts_in_the_window_it_ended_in_and_an_untimed_one_in_none(ledger: Ledger) -> None:
    """Attempt 1 runs 5..70 min and is preempted; attempt 2, inferred from Kueue's count, has no
    times, so its row spans the workload's life; attempt 3 runs from 90 min."""
    preempted = allocation(finished=at(70), end_reason=EndReason.PREEMPTED, end_detail="InClusterQueue")
    unseen = allocation(
        attempt=2, quota_reserved=None, admitted=None, started=None, placements=(), flavors=(),
        end_reason=EndReason.PREEMPTED, end_detail=INFERRED_FROM_COUNT,
    )  # fmt: skip
    ledger.append([preempted, unseen, allocation(attempt=3, quota_reserved=at(90), admitted=at(90))])
    counts = []
    for start, end in ((0, 60), (60, 120), (120, 180)):
        r = reports.report(ledger, at(start), at(end))
        counts.append(sum(row.preemptions for row in r.rows))
        assert r.untimed_preemptions == ("research/train-a",)
    assert counts == [0, 1, 0]
    assert "untimedPreemptions" in reports.to_json(r) and "never observed" in reports.to_html(r)


def test_report_lists_workloads_without_complete_labels(ledger: Ledger) -> None:
    ledger.append([allocation(model=None, finished=at(30))])
    r = reports.report(ledger, at(0), at(60))
    assert r.incomplete == ("research/train-a",)
