"""A real cluster's ledger as a trace: what each workload asked for, when, and how long it ran.

A workload (one ``workload_uid``) becomes one job: it was submitted when its first attempt was
created, it asks for what its attempts were admitted with (a gang of ``placements`` pods when the
count splits evenly over them, else one pod), on the GPU model its pods ran on, and it lasts as long
as its successful attempt ran (``started`` → ``finished``, less ``FINISH_LATENCY_S``: ``finished`` is
Kueue's finish, about a second after the pods' end, which the simulator adds again). A workload without a finished attempt
(still running, failed, or preempted for good) has no known duration and is left out, as is one
that asked for no GPU; ``Converted`` counts both. The ledger does not know a job's kind: a gang or four cards or more is training, a MIG
instance or a shared card is dev, anything else batch-eval (documented in docs/traces.md).

A placement's GPU model is what the recorder saw on the node: GPU Feature Discovery's
``nvidia.com/gpu.product`` (``NVIDIA-H100-80GB-HBM3``; ``-SHARED`` appended on a time-sliced node,
``-MIG-<profile>`` under the single MIG strategy), or a catalogue name in a ledger the simulator
wrote. ``gpu_models`` are catalogue names (``H100-SXM5-80GB``), which the simulator's nodes carry, so
each value is mapped through the catalogue's ``product`` column (``catalogue_name``); a value the
catalogue does not know, or knows under two names the policy cannot tell apart, stops the conversion
with the workload, the node and the value named.

Only the ledger's public read API is used (``Ledger.open`` without migrating, ``allocations``), and a
ledger file that does not exist is refused instead of created: reading never changes what it reads.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpufleet import gpus
from gpufleet.errors import InputError
from gpufleet.ledger.records import FINISH_LATENCY_S, Allocation, EndReason
from gpufleet.ledger.store import Ledger
from gpufleet.policy import FleetPolicy
from gpufleet.trace.job import Job, JobKind

MIG_PREFIX = "nvidia.com/mig-"
SHARED_SUFFIX = "-SHARED"  # GFD's product on a time-sliced node whose resource is not renamed
MIG_PRODUCT_INFIX = "-MIG-"  # GFD's product under the single MIG strategy: <product>-MIG-<profile>


@dataclass(frozen=True)
class Converted:
    jobs: list[Job]
    workloads: int  # workloads in the ledger
    unfinished: int  # left out: no finished attempt, so no duration
    without_gpus: int  # left out: asked for no GPU
    simulated: int  # workloads whose records say they were simulated, not observed


def _exists(url: str) -> None:
    if "://" in url:
        return
    if not Path(url).is_file():
        raise InputError.one(
            "no such ledger file (a reading command never creates one)", file=url, path="--from-ledger"
        )


def read_allocations(url: str) -> list[Allocation]:
    _exists(url)
    with Ledger.open(url, migrate=False) as ledger:
        try:
            return ledger.allocations()
        except Exception as exc:  # SQLAlchemy's errors for a database that is not a ledger
            raise InputError.one(f"cannot read the ledger: {exc}", file=url, path="--from-ledger") from None


def guess_kind(pods: int, gpus: int, sliced: bool) -> JobKind:
    """A gang or four cards or more: training; a MIG instance or a shared card: dev; else batch-eval."""
    if pods > 1 or gpus >= 4:
        return JobKind.TRAINING
    return JobKind.DEV if sliced else JobKind.BATCH_EVAL


def catalogue_name(value: str, policy: FleetPolicy | None = None) -> str:
    """The catalogue name for a recorded GPU model: a catalogue name or alias as it is, or a GFD
    product mapped through the catalogue. Raises ValueError (unknown, or ambiguous where the policy's
    pools do not settle it)."""
    known = gpus.lookup(value)
    if known is not None:
        return known.name
    product = value.strip()
    if product.upper().endswith(SHARED_SUFFIX):
        product = product[: -len(SHARED_SUFFIX)]
    cut = product.upper().find(MIG_PRODUCT_INFIX)
    if cut > 0:
        product = product[:cut]
    found = [m.name for m in gpus.models() if m.product.casefold() == product.casefold()]
    if len(found) > 1 and policy is not None:
        pooled = {model.name for p in policy.pools if (model := gpus.lookup(p.gpu)) is not None}
        found = [name for name in found if name in pooled] or found
    if len(found) == 1:
        return found[0]
    if found:
        raise ValueError(f"GPU product {value!r} is ambiguous: it is the product of {', '.join(found)}")
    raise ValueError(
        f"GPU model {value!r} is neither a catalogue name nor a GPU Feature Discovery product the catalogue "
        f"knows (products: {', '.join(m.product for m in gpus.models())})"
    )


def _models(allocation: Allocation, policy: FleetPolicy | None, source: str) -> tuple[str, ...]:
    out = set()
    for place in allocation.placements:
        if place.gpus <= 0 or not place.gpu_model:
            continue
        try:
            out.add(catalogue_name(place.gpu_model, policy))
        except ValueError as exc:
            where = f"workload {allocation.workload_uid} attempt {allocation.attempt}, node {place.node}: gpu_model"
            raise InputError.one(str(exc), file=source, path=where) from None
    return tuple(sorted(out))


def _priority_classes(policy: FleetPolicy | None) -> dict[int, str]:
    if policy is None:
        return {}
    return {pc.value: pc.name for pc in reversed(policy.priorityClasses)}  # the first name wins a tie


def _team(a: Allocation, teams: dict[str, str]) -> str:
    return teams.get(a.namespace) or a.team or a.namespace


def to_jobs(allocations: Sequence[Allocation], policy: FleetPolicy | None = None, source: str = "") -> Converted:
    """One job per workload with a finished attempt; ``policy`` names the teams and priority classes
    (and settles a GPU product two catalogue models share); ``source`` names the ledger in errors."""
    by_uid: dict[str, list[Allocation]] = defaultdict(list)
    for a in allocations:
        by_uid[a.workload_uid].append(a)
    if not by_uid:
        return Converted([], 0, 0, 0, 0)
    origin = min(a.created for a in allocations)
    teams = {ns: t.name for t in policy.teams for ns in t.namespaces} if policy else {}
    priorities = _priority_classes(policy)
    jobs: list[Job] = []
    unfinished = 0
    without_gpus = 0
    simulated = 0
    seen: set[str] = set()
    for uid, attempts in sorted(by_uid.items(), key=lambda kv: (min(a.created for a in kv[1]), kv[0])):
        attempts.sort(key=lambda a: a.attempt)
        simulated += any(a.simulated for a in attempts)
        done = next(
            (a for a in reversed(attempts) if a.end_reason is EndReason.FINISHED and a.started and a.finished), None
        )
        if done is None or done.started is None or done.finished is None:
            unfinished += 1
            continue
        if done.gpu_count <= 0:
            without_gpus += 1
            continue
        first = attempts[0]
        places = [p for p in done.placements if p.gpus > 0]
        pods = len(places) if places and done.gpu_count % len(places) == 0 else 1
        models = _models(done, policy, source)
        job_id = done.name if done.name not in seen else f"{done.name}-{uid[:8]}"
        seen.add(job_id)
        mig = done.gpu_resource.removeprefix(MIG_PREFIX) if done.gpu_resource.startswith(MIG_PREFIX) else ""
        sliced = bool(mig) or done.gpu_resource.endswith(".shared")
        jobs.append(
            Job(
                job_id=job_id,
                team=_team(done, teams),
                namespace=done.namespace,
                submit_s=int((first.created - origin).total_seconds()),
                duration_s=max(int((done.finished - done.started).total_seconds()) - FINISH_LATENCY_S, 1),
                kind=guess_kind(pods, done.gpu_count, sliced),
                pods=pods,
                gpus=done.gpu_count // pods,
                mig_profile=mig,
                gpu_models=models,
                priority_class=priorities.get(done.priority, ""),
                model=done.model or "",
                data_class=done.data_class or "",
                checkpoint=done.checkpoint or "",
            )
        )
    jobs.sort(key=lambda j: (j.submit_s, j.job_id))
    return Converted(jobs, len(by_uid), unfinished, without_gpus, simulated)
