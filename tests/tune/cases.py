"""Tiny fleets and traces where the better policy is known by hand."""

from __future__ import annotations

from gpufleet.policy import FleetPolicy, parse_policy
from gpufleet.trace.job import Job, JobKind

HOUR = 3600

# One four-card training node shared by two teams with two guaranteed cards each; team a may not
# borrow (borrowingLimit 0), so while b is idle two of a's cards' worth of b's quota sit unused.
LIMITED = """
apiVersion: gpufleet.io/v1alpha1
kind: FleetPolicy
cluster: {provider: onprem, kubernetes: "1.34", dra: off}
priorityClasses: [{name: batch, value: 100}]
dataClasses: [{name: internal, checkpointLocations: ["s3://eu-central-1/"]}]
pools:
  - {name: train, gpu: H100-SXM5-80GB, nodes: [n1], gpusPerNode: 4, role: training, slicing: {mode: full}}
  - {name: serve, gpu: H100-SXM5-80GB, nodes: [s1], gpusPerNode: 1, role: serving, slicing: {mode: full}}
teams:
  - name: a
    namespaces: [a]
    quota: {train: {gpus: 2, borrowingLimit: 0}}
    priorityClasses: [batch]
    dataClasses: [internal]
  - {name: b, namespaces: [b], quota: {train: {gpus: 2}}, priorityClasses: [batch], dataClasses: [internal]}
serving:
  pool: serve
  deployments: [{name: chat, model: m/chat, replicas: 1, gpusPerReplica: 1}]
"""


def policy(text: str = LIMITED) -> FleetPolicy:
    return parse_policy(text, "limited.yaml")


def job(job_id: str, team: str, submit: int, duration: int, gpus: int = 1) -> Job:
    return Job(job_id, team, team, submit, duration, JobKind.TRAINING, gpus=gpus, priority_class="batch")


def a_alone() -> list[Job]:
    """Eight one-card hour-long jobs of team a at once; b submits nothing.

    By hand: with borrowingLimit 0 team a runs two at a time (four rounds, the last waits 3 h); with
    the limit lifted it runs four at a time (two rounds, the last waits 1 h), like first apply. In
    the queue world each later round starts two seconds after the last ends: Kueue frees a finished
    job's quota a finish delay (1 s, ``SimulationConfig.finish_delay_s``) after its pods end, and its
    jobs were parked, so Kueue wakes them one requeue batch after the quota frees (twin/clocks.py).
    In first apply's 2 h window that is 3598 s per card in the second round: 3.999 GPU-h (limit 0,
    2 cards) and 7.998 (lifted, 4 cards); the last waits are 3 h 6 s and 1 h 2 s.
    """
    return [job(f"a-{i}", "a", 0, HOUR) for i in range(8)]


def b_comes_back() -> list[Job]:
    """Team a floods at 0; team b wants its two guaranteed cards after 30 minutes.

    By hand: with the limit lifted a borrows b's two cards, and b reclaims them (preempting two of
    a's jobs) unless reclaimWithinCohort is Never, in which case b waits for a's jobs to end.
    """
    return [*a_alone(), job("b-0", "b", HOUR // 2, HOUR), job("b-1", "b", HOUR // 2, HOUR)]


def b_wants_the_pool() -> list[Job]:
    """Team a floods at 0; after 30 minutes team b wants the whole pool for one four-card job.

    By hand: b's quota is two cards, so the job must borrow a's other two. Under the input a's
    borrowingLimit 0 keeps a on its own two cards, for four hours, so b's job waits past the window:
    b served nothing of what it asked, Jain over the fair shares 0.5. Lifting the limit lets a finish
    in two hours and b run, so other policies reach 1.
    """
    return [*a_alone(), job("b-0", "b", HOUR // 2, HOUR, gpus=4)]


def a_needs_the_pool() -> list[Job]:
    """Team a submits a four-card job (the whole pool) and a five-card one, among one-card jobs.

    By hand: with a's borrowingLimit 0 a reaches two cards, so the input strands the four-card job,
    which first apply runs (the pool is one four-card node); lifting the limit (or lending b's cards)
    saves it. No policy saves the five-card job: the pool has four cards; one more card would.
    """
    return [
        job("a-big", "a", 0, HOUR, gpus=4),
        job("a-huge", "a", 0, HOUR, gpus=5),
        *(job(f"a-{i}", "a", HOUR, HOUR) for i in range(2)),
        job("b-0", "b", 0, HOUR),
    ]
