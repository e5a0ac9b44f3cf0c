"""A small hand-made history with known answers: two holders, one workload that waited and was preempted."""

from __future__ import annotations

from ledger_factories import allocation, at, wait

from gpufleet.ledger.records import EndReason, Placement, Record

H100 = (("nvidia.com/gpu", "h100-train"),)


def history() -> list[Record]:
    big = allocation(
        workload_uid="uid-big",
        name="train-big",
        quota_reserved=at(5),
        admitted=at(5),
        started=at(6),
        finished=at(65),
        end_reason=EndReason.FINISHED,
        end_detail="Succeeded",
        gpu_count=8,
        placements=(Placement("h100-train-0", 8, (), "H100"),),
    )
    vision = allocation(
        workload_uid="uid-v",
        namespace="vision",
        name="train-v",
        team="vision",
        cluster_queue="vision",
        model="vit-h",
        data_class="public",
        quota_reserved=at(0),
        admitted=at(0),
        started=at(1),
        finished=at(40),
        end_reason=EndReason.FINISHED,
        gpu_count=4,
        borrowing=True,
        placements=(Placement("h100-train-1", 4, ("0", "1", "2", "3"), "H100"),),
    )
    first = allocation(
        workload_uid="uid-a",
        attempt=1,
        created=at(10),
        quota_reserved=at(40),
        admitted=at(40),
        started=at(41),
        finished=at(50),
        end_reason=EndReason.PREEMPTED,
        end_detail="InCohortReclamation",
        end_message="Preempted to accommodate a workload due to reclamation within the cohort",
        gpu_count=4,
        placements=(Placement("h100-train-1", 4, ("0", "1", "2", "3"), "H100"),),
    )
    second = allocation(
        workload_uid="uid-a",
        attempt=2,
        created=at(10),
        quota_reserved=at(70),
        admitted=at(70),
        started=at(71),
        finished=at(130),
        end_reason=EndReason.FINISHED,
        end_detail="Succeeded",
        gpu_count=4,
        placements=(Placement("h100-train-0", 4, (), "H100"),),
    )
    waits = [
        wait(index=0, start=at(10), end=at(40)),
        wait(index=1, start=at(50), end=at(70), reason="WaitingForQuota"),
    ]
    return [big, vision, first, second, *waits]
