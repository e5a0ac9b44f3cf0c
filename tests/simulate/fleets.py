"""Tiny fleets and jobs whose outcomes the tests work out by hand."""

from __future__ import annotations

from gpufleet.policy import Fleet, parse_policy, resolve
from gpufleet.simulate.config import ServingCurve
from gpufleet.trace.job import Job, JobKind

FLAT = ServingCurve(hourly=(1.0,) * 24)  # every deployment at its policy count all day

HEADER = """
apiVersion: gpufleet.io/v1alpha1
kind: FleetPolicy
cluster: {provider: onprem, kubernetes: "1.34", dra: off}
priorityClasses: [{name: batch, value: 100}]
dataClasses: [{name: internal, checkpointLocations: ["s3://eu-central-1/"]}]
"""

# Two teams of equal weight, one guaranteed card each on a two-card training node; one serving card.
TWO_TEAMS = (
    HEADER
    + """
pools:
  - {name: train, gpu: H100-SXM5-80GB, nodes: [n1], gpusPerNode: 2, role: training, slicing: {mode: full}}
  - {name: serve, gpu: H100-SXM5-80GB, nodes: [s1], gpusPerNode: 1, role: serving, slicing: {mode: full}}
teams:
  - {name: a, namespaces: [a], quota: {train: {gpus: 1}}, priorityClasses: [batch], dataClasses: [internal]}
  - {name: b, namespaces: [b], quota: {train: {gpus: 1}}, priorityClasses: [batch], dataClasses: [internal]}
serving:
  pool: serve
  deployments: [{name: chat, model: m/chat, replicas: 1, gpusPerReplica: 1}]
"""
)

# One team, a two-card training node, and a four-card serving node running four one-card replicas.
SERVING_AT_RISK = (
    HEADER
    + """
pools:
  - {name: train, gpu: H100-SXM5-80GB, nodes: [n1], gpusPerNode: 2, role: training, slicing: {mode: full}}
  - {name: serve, gpu: H100-SXM5-80GB, nodes: [s1], gpusPerNode: 4, role: serving, slicing: {mode: full}}
teams:
  - {name: a, namespaces: [a], quota: {train: {gpus: 2}}, priorityClasses: [batch], dataClasses: [internal]}
serving:
  pool: serve
  deployments: [{name: chat, model: m/chat, replicas: 4, gpusPerReplica: 1}]
"""
)

# Two A100 nodes with one card each, cut all-balanced: one 3g.40gb instance per node, two in the pool.
MIG_SPREAD = (
    HEADER
    + """
pools:
  - {name: mig, gpu: A100-SXM4-80GB, nodes: [m1, m2], gpusPerNode: 1, role: batch,
     slicing: {mode: mig, layout: all-balanced}}
teams:
  - {name: a, namespaces: [a], quota: {mig: {mig: {3g.40gb: 2}}}, priorityClasses: [batch], dataClasses: [internal]}
"""
)

# One one-card node of each of two GPU models, both full cards: a pod's affinity picks the model.
TWO_MODELS = (
    HEADER
    + """
pools:
  - {name: h100, gpu: H100-SXM5-80GB, nodes: [h1], gpusPerNode: 1, role: training, slicing: {mode: full}}
  - {name: a100, gpu: A100-SXM4-80GB, nodes: [g1], gpusPerNode: 1, role: training, slicing: {mode: full}}
teams:
  - {name: a, namespaces: [a], quota: {h100: {gpus: 1}, a100: {gpus: 1}}, priorityClasses: [batch],
     dataClasses: [internal]}
"""
)


def fleet(text: str) -> Fleet:
    return resolve(parse_policy(text, "test-fleet.yaml"))


def job(
    job_id: str,
    team: str,
    submit: int,
    duration: int,
    *,
    gpus: int = 1,
    pods: int = 1,
    mig: str = "",
    kind: JobKind = JobKind.TRAINING,
) -> Job:
    return Job(
        job_id, team, team, submit, duration, kind, pods=pods, gpus=gpus, mig_profile=mig, priority_class="batch"
    )


# One team on two training nodes of two cards each: a 2×2 gang cannot fit beside a 2-card job on one node.
TWO_NODES = (
    HEADER
    + """
pools:
  - {name: train, gpu: H100-SXM5-80GB, nodes: [n1, n2], gpusPerNode: 2, role: training, slicing: {mode: full}}
teams:
  - {name: a, namespaces: [a], quota: {train: {gpus: 4}}, priorityClasses: [batch], dataClasses: [internal]}
"""
)

# Two teams guaranteed one H100 each on one two-card node, a's borrowing limited to BORROW; and an
# A100 cut all-balanced (3g.40gb + 2g.20gb + 1g.10gb) that no team has quota on.
LIMITED = (
    HEADER
    + """
pools:
  - {name: train, gpu: H100-SXM5-80GB, nodes: [n1], gpusPerNode: 2, role: training, slicing: {mode: full}}
  - {name: mig, gpu: A100-SXM4-80GB, nodes: [m1], gpusPerNode: 1, role: batch,
     slicing: {mode: mig, layout: all-balanced}}
teams:
  - {name: a, namespaces: [a], quota: {train: {gpus: 1, borrowingLimit: BORROW}}, priorityClasses: [batch],
     dataClasses: [internal]}
  - {name: b, namespaces: [b], quota: {train: {gpus: 1}}, priorityClasses: [batch], dataClasses: [internal]}
"""
)


def limited(borrow: str) -> Fleet:
    return fleet(LIMITED.replace("BORROW", borrow))
