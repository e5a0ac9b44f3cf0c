"""Hand-written scenarios for the differential test: cases the random ones rarely reach.

Each is a :class:`~tests.e2e.random_scenarios.Scenario` (the same manifests, release and comparison as
the seeded ones) with what the real Kueue v0.19.2 does, and why, written beside it. Their seeds sit far
above the random ones so names never collide.
"""

from __future__ import annotations

from tests.e2e.random_scenarios import GPU, CohortSpec, FlavorQuota, JobSpec, KueueConfig, QueueSpec, Quota, Scenario


def _queue(
    name: str, cohort: str, nominal: int, *, strategy: str = "BestEffortFIFO", preempts: bool = False
) -> QueueSpec:
    policy = "LowerPriority" if preempts else "Never"
    return QueueSpec(
        name=name, cohort=cohort, strategy=strategy, within=policy, reclaim=policy, borrow_within="Never",
        threshold=None, weight=None, flavors=(FlavorQuota("rnd-f0", (Quota(GPU, nominal),)),),
    )  # fmt: skip


def _job(name: str, queue: str, gpus: int, priority: str, *, before: bool = False) -> JobSpec:
    return JobSpec(name, queue, 1, ((GPU, gpus),), priority, before)


# A head that needs preemption and has no candidates reserves quota by its borrowing level as Kueue's
# SimulatePreemption gives it, with the usage as it stands: q0 holds 2 of its 4 GPUs and asks for 4
# more, so it would borrow (level 1) and reserves all 4 (no borrowing limit), not only the 2 left of its
# nominal quota. The cohort's last 3 GPUs then stay free: q2's 1-GPU Job does not fit behind it, every
# cycle, since q0 is StrictFIFO and its head comes back each time. Counted on the tree without usage,
# the level was 0 and q2's Job was admitted.
RESERVE_AT_LEVEL = Scenario(
    seed=900_001,
    config=KueueConfig(fair_sharing=False),
    resources=(GPU,),
    cohorts=(CohortSpec("c0"),),
    queues=(
        _queue("q0", "c0", 4, strategy="StrictFIFO", preempts=True),
        _queue("q1", "c0", 4),
        _queue("q2", "c0", 0),
    ),
    jobs=(
        _job("j00", "q0", 2, "rnd-high", before=True),
        _job("j01", "q1", 3, "rnd-high", before=True),
        _job("j02", "q0", 4, "rnd-high"),
        _job("j03", "q2", 1, "rnd-low"),
    ),
)

# Entries are ordered by borrowing level before priority, and a level is the height of the lowest
# cohort that holds the request (Kueue's FindHeightOfLowestSubtreeThatFits), not the steps up to it:
# qr sits right under c0, which also holds the cohort c1, so qr borrows at level 2 and qa, borrowing
# inside c1, at level 1. qa's low-priority Job goes first and takes the 4 GPUs both ask for. Counted as
# steps, both were at level 1 and qr's high-priority Job won.
LEVEL_IS_A_HEIGHT = Scenario(
    seed=900_002,
    config=KueueConfig(fair_sharing=False),
    resources=(GPU,),
    cohorts=(CohortSpec("c0"), CohortSpec("c1", parent="c0")),
    queues=(_queue("qa", "c1", 0), _queue("qb", "c1", 4), _queue("qr", "c0", 0)),
    jobs=(_job("j00", "qr", 4, "rnd-high"), _job("j01", "qa", 4, "rnd-low")),
)

PINNED = {"reserve-at-level": RESERVE_AT_LEVEL, "level-is-a-height": LEVEL_IS_A_HEIGHT}
# What the real Kueue v0.19.2 admitted in each, seen on the testbed (the test checks the twin and Kueue
# agree; this keeps the case meaningful should both drift together).
KUEUE_ADMITS = {"reserve-at-level": {"j00", "j01"}, "level-is-a-height": {"j01"}}
