"""How a simulation runs: which world (the queue or the first apply), Kueue's waitForPodsReady
settings, the serving demand curve, and how finely the time series are kept.

Defaults are Kueue ``v1beta2``'s own (``apis/config/v1beta2/defaults.go``): waitForPodsReady is
always on with a 30-minute timeout, requeuing by eviction time, a backoff of 60 s doubling per
requeue up to 3,600 s, and no limit on the number of requeues. Kueue adds a small random jitter to
the backoff; the twin leaves it out so every run is reproducible. The policy's
``queueing.waitForPodsReady.timeoutSeconds``, when set, is the timeout Kueue runs with, so
``for_policy`` puts it in the run's configuration (``simulate`` does, for every caller). The
scheduler's node scoring is the policy's ``scheduling.nodeScoring`` unless the configuration names
one (``simulate --placement``; FragmentationAware is gpufleet's own model, which no policy can say).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum

from gpufleet.ledger.records import FINISH_LATENCY_S
from gpufleet.policy.model import FleetPolicy
from gpufleet.twin.clocks import RELEASE_DELAY_MS

HOUR = 3600
DAY = 24 * HOUR


class Mode(StrEnum):
    """The two worlds a run can model."""

    QUEUE = "queue"  # Kueue in front of the cards: quotas, taints, flavors, waitForPodsReady
    FIRST_APPLY = "first-apply"  # no Kueue, no taints, no quotas: pods straight to the scheduler


class PlacementPolicy(StrEnum):
    """The scheduler's node scoring: kube-scheduler's two NodeResourcesFit strategies, and gpufleet's
    fragmentation model (simulate only)."""

    LEAST_ALLOCATED = "LeastAllocated"
    MOST_ALLOCATED = "MostAllocated"
    FRAGMENTATION_AWARE = "FragmentationAware"


# Share of each deployment's policy replicas wanted in each hour of the day (UTC): quiet at night,
# the full count in working hours. The policy's replica count is sized for the peak.
DEFAULT_SERVING_CURVE: tuple[float, ...] = (
    0.25, 0.25, 0.25, 0.25, 0.25, 0.25,  # 00-05
    0.5, 0.75, 1.0, 1.0, 1.0, 1.0,  # 06-11
    1.0, 1.0, 1.0, 1.0, 1.0, 1.0,  # 12-17
    0.75, 0.75, 0.5, 0.5, 0.25, 0.25,  # 18-23
)  # fmt: skip


@dataclass(frozen=True)
class PodsReady:
    """Kueue's ``waitForPodsReady``: an admitted workload must have every pod running in time."""

    timeout_s: int = 30 * 60
    backoff_base_s: int = 60
    backoff_max_s: int = HOUR
    backoff_limit: int | None = None  # None: requeue forever (Kueue's default)

    def backoff(self, requeues: int) -> int:
        """Seconds until the ``requeues``-th requeue: base · 2^(n−1), capped at the maximum."""
        return min(self.backoff_base_s << max(requeues - 1, 0), self.backoff_max_s)


@dataclass(frozen=True)
class ServingCurve:
    """Wanted replicas per deployment over the day: ``ceil(replicas · share[hour])``, at least one
    replica of every deployment the policy runs."""

    hourly: tuple[float, ...] = DEFAULT_SERVING_CURVE

    def __post_init__(self) -> None:
        if len(self.hourly) != 24 or any(not 0 <= f <= 1 for f in self.hourly):
            raise ValueError("a serving curve has 24 hourly shares between 0 and 1")

    def wanted(self, replicas: int, t: int) -> int:
        if replicas == 0:
            return 0
        share = self.hourly[(t % DAY) // HOUR]
        return max(1, -(-int(replicas * share * 1000) // 1000))


@dataclass(frozen=True)
class SimulationConfig:
    mode: Mode = Mode.QUEUE
    placement: PlacementPolicy | None = None  # None: the policy's scheduling.nodeScoring (for_policy)
    pods_ready: PodsReady = field(default_factory=PodsReady)
    serving: ServingCurve = field(default_factory=ServingCurve)
    release_delay_s: int = RELEASE_DELAY_MS // 1000
    """Seconds from a preemption to the release of the victim's quota. Kueue's job reconciler clears
    the reservation once the Job is no longer active (``jobframework/reconciler.go``, "handle
    eviction"; ``IsActive`` is ``status.active != 0`` for a batch Job), and the Job controller does
    not count pods being deleted as active: so the quota frees about a second after the eviction
    (the twin's ``RELEASE_DELAY_MS``, measured on issue 18's testbed), while the pods still hold
    their GPUs for their grace period (each job's ``termination_grace_s``, Kubernetes' 30 s unless
    the trace says otherwise). 0: at the eviction's own instant."""
    finish_delay_s: int = FINISH_LATENCY_S
    """Seconds from a job's run end to Kueue releasing its quota. The pods succeed and free their node
    at once (the scheduler sees a succeeded pod's resources free), but the quota frees only once the
    Job controller has marked the Job complete and Kueue's job reconciler has finished the Workload.
    1 s: measured on the testbed by the world differential (issue 32; docs/simulate.md): of 131
    recorded finishes over 9 real runs, 122 ended 1 s after their pods' run-for in the ledger's whole
    seconds, 6 ended 2 s after, 2 in the same second. The ledger's ``finished`` is then, as the
    recorder writes it. A real job of hours does not notice it; a race of one second (a reclaim and a
    finish in the same second) goes the real way."""
    pod_start_delay_s: int = 0
    """Seconds from Kueue admitting a workload to its pods reaching the scheduler (Kueue unsuspends the
    Job, the Job controller creates the pods). Measured on the same runs: well under a second; a pod on
    a free node started in its admission's second 95 times of 109, a second later 14 times (so about
    0.1 s; the pods of what one Kueue cycle admits bind before its next cycle, ``QueueWorld``). 0: at
    the admission's instant.
    The waitForPodsReady timeout counts from the admission either way, as Kueue's does."""
    jitter_seed: int | None = None
    """None (the default): every run of the same input gives the same output. A seed: what is random
    in a real cluster is drawn from it, for an ensemble of plausible runs (``simulate.differential``):
    kube-scheduler's pick among nodes of equal score, at every bind (``placement.Cluster``), and each
    finish or a victim's release a second later than configured with probability ``late_finish``.
    The pod start is not drawn: it is a tenth of a second, never a whole one."""
    late_finish: float = 0.05  # the testbed's share of finishes a second later than the rest: 6 of 131
    bucket_s: int = HOUR  # width of one time-series bucket
    start: datetime = datetime(2026, 1, 5, tzinfo=UTC)  # wall time of trace second 0 (ledger times)
    until_s: int | None = None  # stop here even if work remains (None: see horizon_after_last_s)
    horizon_after_last_s: int = 7 * DAY  # without until_s: stop this long after the last arrival
    reference_twin: bool = False  # the queue world's Kueue on the twin's reference path (no memo, no streaks)

    def __post_init__(self) -> None:
        if min(self.release_delay_s, self.finish_delay_s, self.pod_start_delay_s) < 0:
            raise ValueError("a control-plane delay cannot be negative")
        if not 0 <= self.late_finish <= 1:
            raise ValueError("late_finish is a share between 0 and 1")


def for_policy(config: SimulationConfig, policy: FleetPolicy) -> SimulationConfig:
    """``config`` with the waitForPodsReady timeout the policy renders into Kueue's Configuration, and
    the policy's node scoring where ``config`` names none (an explicit placement wins)."""
    if config.placement is None:
        config = replace(config, placement=PlacementPolicy(policy.scheduling.nodeScoring))
    timeout = policy.queueing.waitForPodsReady.timeoutSeconds
    if timeout is None or timeout == config.pods_ready.timeout_s:
        return config
    return replace(config, pods_ready=replace(config.pods_ready, timeout_s=timeout))
