"""The slicing decision table: how each pool's cards are shared, and why.

Rows are read top to bottom; the first whose condition holds decides. Each row names the modes it
accepts and the one it prefers. A pool without ``slicing`` gets the preferred mode; a pool whose
declared slicing is not among the accepted modes keeps it, but the decision is flagged with the row's
reason, so the plan shows the disagreement instead of silently overriding the engineer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from gpufleet.gpus import GpuModel, Layout, resolve_layout
from gpufleet.policy.model import FullSlicing, MigSlicing, Pool, Role, TimesliceSlicing, WorkloadClass


class SlicingMode(StrEnum):
    """How a pool's cards are shared: the one spelling the policy (``slicing.mode``), the plan, the
    simulator, ``trace synth`` and ``scan`` use."""

    FULL = "full"
    MIG = "mig"
    TIMESLICE = "timeslice"


DEFAULT_MIG_LAYOUT = "all-balanced"
DEFAULT_TIMESLICE_REPLICAS = 4
MAX_TIMESLICE_REPLICAS = 16


@dataclass(frozen=True)
class Facts:
    """What the table looks at for one pool."""

    pool: Pool
    gpu: GpuModel
    serving_latency_goal_ms: int | None  # set when this pool is the serving pool and has a goal

    @property
    def workloads(self) -> frozenset[WorkloadClass]:
        return frozenset(self.pool.workloads)


@dataclass(frozen=True)
class Row:
    reason: str  # PascalCase machine reason
    when: str  # the condition, in words (the table prints it)
    accepts: tuple[SlicingMode, ...]
    prefers: SlicingMode
    test: Callable[[Facts], bool]
    explain: Callable[[Facts], str]


def _big_jobs(f: Facts) -> bool:
    return bool(f.workloads & {WorkloadClass.TRAINING, WorkloadClass.LARGE_CONTEXT}) or (
        f.pool.role is Role.TRAINING and not f.workloads
    )


def _jitter_tolerant(f: Facts) -> bool:
    small = {WorkloadClass.DEV, WorkloadClass.SMALL_INFERENCE}
    return (bool(f.workloads) and f.workloads <= small) or (f.pool.role is Role.DEV and not f.workloads)


TABLE: tuple[Row, ...] = (
    Row(
        "ServingLatencyGoal",
        "serving pool with a latency goal",
        (SlicingMode.FULL, SlicingMode.MIG),
        SlicingMode.FULL,
        lambda f: f.pool.role is Role.SERVING and f.serving_latency_goal_ms is not None,
        lambda f: (
            f"serving has a {f.serving_latency_goal_ms} ms latency goal: time-slicing would let other "
            "processes' kernels delay its tokens, so it gets full cards (or MIG slices, which are isolated)"
        ),
    ),
    Row(
        "ServingReserved",
        "serving pool",
        (SlicingMode.FULL, SlicingMode.MIG),
        SlicingMode.FULL,
        lambda f: f.pool.role is Role.SERVING,
        lambda f: "serving replicas hold their cards for good; full cards keep memory and faults isolated",
    ),
    Row(
        "TrainingNeedsFullCards",
        "training or large-context work",
        (SlicingMode.FULL,),
        SlicingMode.FULL,
        _big_jobs,
        lambda f: (
            "training and large contexts need a card's whole memory and compute; slicing would only fragment them"
        ),
    ),
    Row(
        "IsolationNeedsMIG",
        "teams must be isolated, card has MIG",
        (SlicingMode.MIG, SlicingMode.FULL),
        SlicingMode.MIG,
        lambda f: f.pool.isolateTeams and f.gpu.mig is not None,
        lambda f: (
            f"teams must be isolated: MIG puts hardware walls (memory, cache, faults) between them on one {f.gpu.name}"
        ),
    ),
    Row(
        "IsolationWithoutMIG",
        "teams must be isolated, card has no MIG",
        (SlicingMode.FULL,),
        SlicingMode.FULL,
        lambda f: f.pool.isolateTeams,
        lambda f: (
            f"teams must be isolated but {f.gpu.name} has no MIG: whole cards per team are the only "
            "isolation; time-slicing shares memory and faults. Alternative: a MIG-capable card "
            "(A30, A100, H100, H200, B200)"
        ),
    ),
    Row(
        "JitterTolerantSharing",
        "dev or small inference only",
        (SlicingMode.TIMESLICE, SlicingMode.MIG),
        SlicingMode.TIMESLICE,
        _jitter_tolerant,
        lambda f: (
            "dev and small inference tolerate latency jitter: time-slicing packs several jobs on a card "
            "(no memory or fault isolation)"
        ),
    ),
    Row(
        "SmallJobsOnMIG",
        "batch evaluation or inference on a MIG card",
        (SlicingMode.MIG, SlicingMode.FULL),
        SlicingMode.MIG,
        lambda f: (
            f.gpu.mig is not None
            and bool(f.workloads)
            and f.workloads <= {WorkloadClass.BATCH_EVAL, WorkloadClass.INFERENCE, WorkloadClass.DEV}
        ),
        lambda f: "evaluation and inference jobs rarely fill a card: MIG slices run several at once, isolated",
    ),
    Row(
        "DefaultFullCard",
        "anything else",
        (SlicingMode.FULL, SlicingMode.MIG, SlicingMode.TIMESLICE),
        SlicingMode.FULL,
        lambda f: True,
        lambda f: "no rule asks for sharing: full cards are the simple, isolated default",
    ),
)


@dataclass(frozen=True)
class SlicingDecision:
    """How one pool's cards are shared, which row decided, and whether the engineer overrode it."""

    pool: str
    mode: SlicingMode
    layout: Layout | None  # MIG only
    layout_name: str | None  # the GPU Operator's name when the layout is a standard one
    replicas: int | None  # time-slicing only
    reason: str
    message: str
    declared: bool  # the policy chose the mode itself
    flagged: bool  # the declared mode is not one the table accepts
    flag_message: str = ""
    sizing: str = ""  # how replicas were sized


def _replicas(facts: Facts) -> tuple[int, str]:
    job = facts.pool.jobMemoryGiB
    if job is None:
        return DEFAULT_TIMESLICE_REPLICAS, (
            f"{DEFAULT_TIMESLICE_REPLICAS} replicas per card (declare jobMemoryGiB to size them)"
        )
    fit = max(1, min(facts.gpu.memory_gib // job, MAX_TIMESLICE_REPLICAS))
    return max(2, fit), f"{facts.gpu.memory_gib} GiB card / {job} GiB per job = {fit} replicas per card"


def decide(facts: Facts) -> SlicingDecision:
    """Run the table for one pool. Raises ValueError when a declared MIG layout cannot be built."""
    row = next(r for r in TABLE if r.test(facts))
    declared = facts.pool.slicing
    mode = SlicingMode(declared.mode) if declared is not None else row.prefers
    if mode is SlicingMode.MIG and facts.gpu.mig is None:
        mode = SlicingMode.FULL  # only reachable from the table's preference; declared MIG is rejected in checks
    flagged = declared is not None and declared.mode not in row.accepts
    flag = (
        f"declared {declared.mode} but the table says {row.prefers} ({row.reason}): kept as declared"
        if flagged and declared is not None
        else ""
    )
    layout: Layout | None = None
    layout_name: str | None = None
    replicas: int | None = None
    sizing = ""
    if mode is SlicingMode.MIG:
        spec = declared.layout if isinstance(declared, MigSlicing) else DEFAULT_MIG_LAYOUT
        layout = resolve_layout(facts.gpu, spec)
        layout_name = spec if isinstance(spec, str) else None
    elif mode is SlicingMode.TIMESLICE:
        if isinstance(declared, TimesliceSlicing) and declared.replicas is not None:
            replicas, sizing = declared.replicas, f"{declared.replicas} replicas per card, as declared"
        else:
            replicas, sizing = _replicas(facts)
    return SlicingDecision(
        pool=facts.pool.name,
        mode=mode,
        layout=layout,
        layout_name=layout_name,
        replicas=replicas,
        reason=row.reason,
        message=row.explain(facts),
        declared=declared is not None,
        flagged=flagged,
        flag_message=flag,
        sizing=sizing,
    )


def renames_shared(pool: Pool) -> bool:
    """Time-sliced cards are advertised as nvidia.com/gpu.shared unless the policy says otherwise."""
    return not isinstance(pool.slicing, TimesliceSlicing) or pool.slicing.renameByDefault


__all__ = ["TABLE", "Facts", "FullSlicing", "Row", "SlicingDecision", "SlicingMode", "decide", "renames_shared"]
