"""Record builders for the ledger tests: one plain default per field, overridable per test."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from gpufleet.ledger.records import Allocation, EndReason, Placement, WaitInterval

T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def allocation(**overrides: Any) -> Allocation:
    base = Allocation(
        workload_uid="uid-a",
        attempt=1,
        namespace="research",
        name="train-a",
        team="research",
        model="llama-3.1-8b",
        data_class="internal",
        checkpoint="s3://eu-central-1/ckpt/a",
        local_queue="training",
        cluster_queue="research",
        priority=1000,
        flavors=(("nvidia.com/gpu", "h100-train"),),
        gpu_resource="nvidia.com/gpu",
        gpu_count=8,
        placements=(Placement("h100-train-0", 8, (), "H100-SXM5-80GB"),),
        created=at(0),
        quota_reserved=at(5),
        admitted=at(5),
        started=at(6),
        finished=None,
        end_reason=None,
        end_detail="",
        end_message="",
        borrowing=False,
        simulated=False,
    )
    return replace(base, **overrides)


def wait(**overrides: Any) -> WaitInterval:
    base = WaitInterval(
        workload_uid="uid-a",
        index=0,
        namespace="research",
        name="train-a",
        team="research",
        local_queue="training",
        reason="WaitingForQuota",
        message="couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu"
        " in flavor h100-train, 8 more needed",
        start=at(0),
        end=at(5),
        simulated=False,
    )
    return replace(base, **overrides)


_names = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)
_times = st.integers(0, 10_000).map(at)


@st.composite
def allocations(draw: st.DrawFn) -> Allocation:
    """Any valid allocation, including unicode labels and finished or preempted ends."""
    created = draw(_times)
    reserved = created + timedelta(minutes=draw(st.integers(0, 600)))
    ended = draw(st.booleans())
    return allocation(
        workload_uid=draw(_names),
        attempt=draw(st.integers(1, 4)),
        name=draw(_names),
        team=draw(
            st.one_of(
                st.none(),
                st.text(
                    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
                    min_size=1,
                    max_size=8,
                ),
            )
        ),
        model=draw(st.one_of(st.none(), _names)),
        gpu_count=draw(st.integers(1, 16)),
        placements=tuple(Placement(f"node-{i}", 1, (str(i),)) for i in range(draw(st.integers(0, 3)))),
        created=created,
        quota_reserved=reserved,
        admitted=reserved,
        finished=reserved + timedelta(minutes=draw(st.integers(1, 900))) if ended else None,
        end_reason=draw(st.sampled_from(list(EndReason))) if ended else None,
        simulated=draw(st.booleans()),
    )


record_lists = st.lists(allocations(), min_size=3, max_size=25, unique_by=lambda a: a.key)
