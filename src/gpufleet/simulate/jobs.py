"""A trace job's life in a simulated run: its attempts, its pods, and what happened to them.

An *attempt* runs from the moment the job (re)enters the queue to the moment its admission ends:
it finished, it was preempted, or waitForPodsReady evicted it. In the first-apply world there is
no queue and one attempt, from submission until the last pod finished.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from gpufleet.placement import DeviceSlot, PodSpec
from gpufleet.simulate.requests import Ask
from gpufleet.trace.job import Job


class State(StrEnum):
    PENDING = "Pending"  # waiting for quota (queue) or for nodes (first-apply)
    ADMITTED = "Admitted"  # holds quota; not every pod is running yet
    RUNNING = "Running"
    TERMINATING = "Terminating"  # preempted: its Workload keeps its quota until Kueue releases it (release delay)
    BACKOFF = "Backoff"  # evicted by waitForPodsReady, waiting out the requeue backoff
    FINISHED = "Finished"
    DEACTIVATED = "Deactivated"  # the requeue limit was reached


WAITING = frozenset({State.PENDING, State.ADMITTED, State.BACKOFF, State.TERMINATING})


@dataclass(slots=True)
class Hold:
    """One pod's hold on its devices: ``worth`` GPUs from ``bound`` until ``released`` (None: still
    bound). Kept per attempt, so the measures can tell GPUs that worked from GPUs held waiting."""

    worth: float
    bound: int
    released: int | None = None


@dataclass
class Attempt:
    number: int
    queued: int  # when it entered the queue (submission, or the eviction it requeues from)
    reason: str = "Pending"  # the last pending reason Kueue gave (or the scheduler's)
    message: str = ""
    reserved: int | None = None  # quota reserved (queue world)
    started: int | None = None  # every pod running
    ended: int | None = None  # finished, or evicted (Kueue's Evicted condition: the ledger's ``finished``)
    released: int | None = None  # quota released (queue world): at the end, or a release delay after a preemption
    end_reason: str = ""  # Finished | Preempted | Evicted
    end_detail: str = ""  # Succeeded | InClusterQueue | … | PodsReadyTimeout
    end_message: str = ""
    end_by: str = ""  # the preemptor's workload key, for a preempted attempt
    flavor: str = ""
    cluster_queue: str = ""
    placements: dict[str, tuple[str, tuple[DeviceSlot, ...]]] = field(default_factory=dict)  # pod -> node, devices
    holds: list[Hold] = field(default_factory=list)  # every pod bound for this attempt
    unschedulable: str = ""  # queue world: the scheduler's last word on a pod it could not place


# JobRun's attributes: its __slots__, and what a copy of it copies (``federation_run``). Compiled
# (``gpufleet.compiled``), a class keeps no ``__slots__`` to read, so they are named here.
RUN_ATTRIBUTES: Final = (
    "ask",
    "attempts",
    "bound",
    "deactivated",
    "gpu_seconds",
    "gpu_worth",
    "holding",
    "index",
    "job",
    "key",
    "never",
    "placed",
    "pods",
    "preemptions",
    "quota",
    "requeues",
    "shape_id",
    "state",
    "work_lost",
)


class JobRun:
    """Mutable run state of one job; ``index`` is its arrival order (the final tie-breaker)."""

    __slots__ = RUN_ATTRIBUTES

    def __new__(cls, *_args: object, **_kwargs: object) -> JobRun:
        # Bare, as pickle makes it before setting its attributes: compiled, a class without its
        # own __new__ would run __init__ with no arguments there (gpufleet.picklable)
        return super().__new__(cls)

    def __init__(self, job: Job, ask: Ask, index: int) -> None:
        self.job = job
        self.ask = ask
        self.index = index
        self.key = f"{job.namespace}/{job.job_id}"
        self.state = State.PENDING
        self.attempts: list[Attempt] = []
        self.pods: list[PodSpec] = []  # the current attempt's pods (``Simulation.set_pods``)
        # The current attempt's pods bound so far (always its first ones), and their one shape's
        # id in the run (None: no pods yet): see ``Simulation.place_round``
        self.placed = 0
        self.shape_id: int | None = None
        # pod -> (GPUs it holds, bound since): the current attempt's, and a preempted attempt's that
        # still terminate (their names carry the attempt, so the two never meet)
        self.bound: dict[str, tuple[float, int]] = {}
        self.holding: dict[str, Hold] = {}  # pod -> its hold in the attempt that bound it
        self.gpu_worth = 0.0  # GPUs the job holds now (terminating pods included)
        self.gpu_seconds = 0.0  # GPU-seconds its pods held, released ones only (see ``held``)
        self.preemptions = 0
        self.requeues = 0
        self.work_lost = 0.0  # GPU-seconds of runs that were preempted
        self.deactivated = False
        self.never = False  # queue world: larger than its team can ever reach (``gpufleet.simulate.reach``)
        self.quota: tuple[str, str, int] | None = None  # (pool, resource, units) its Workload reserves now

    @property
    def attempt(self) -> Attempt:
        return self.attempts[-1]

    @property
    def team(self) -> str:
        return self.job.team

    def begin(self, t: int) -> Attempt:
        attempt = Attempt(len(self.attempts) + 1, t)
        self.attempts.append(attempt)
        return attempt

    def held(self, end: int) -> float:
        """GPU-seconds its pods held by ``end``, counting pods still bound then."""
        return self.gpu_seconds + sum(worth * (end - since) for worth, since in self.bound.values())

    def waited(self, end: int) -> int:
        """Seconds spent without running between submission and ``end`` (or the run that finished)."""
        total = 0
        for a in self.attempts:
            stop = a.started if a.started is not None else a.ended if a.ended is not None else end
            total += stop - a.queued
        return total

    def unplaced(self, end: int) -> int:
        """Seconds its attempts held quota without every pod running (a preempted attempt that never
        ran held it until the release)."""
        total = 0
        for a in self.attempts:
            if a.reserved is not None:
                stop = a.started if a.started is not None else a.released if a.released is not None else end
                total += stop - a.reserved
        return total
