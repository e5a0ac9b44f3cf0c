"""``gpufleet check`` as a function: what the cluster's admission chain would say about each object.

The chain is replayed in the API server's order: the mutating webhook fills in what is missing, then
the rules judge the result. For admitted batch work the verdict also names where it will queue and
which pools (Kueue flavors) could hold it, so a team sees in CI where its job can run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpufleet.check.catalogue import Scope
from gpufleet.check.documents import Source
from gpufleet.check.facts import QUEUE_LABEL, AdmissionFacts
from gpufleet.check.mutation import Filled, apply, fills, patch
from gpufleet.check.residency import residency_of
from gpufleet.check.rules import Denial, candidates, fits, judge, subject
from gpufleet.check.workloads import claim_needs, mapping, pod_gpus, text

DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True)
class Verdict:
    source: Source
    kind: str
    namespace: str
    name: str
    governed: bool
    denials: list[Denial] = field(default_factory=list)
    filled: list[Filled] = field(default_factory=list)
    local_queue: str | None = None
    cluster_queue: str | None = None
    flavors: list[str] = field(default_factory=list)
    requests_gpus: bool = False

    @property
    def admitted(self) -> bool:
        return not self.denials

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.source.file,
            "document": self.source.document,
            "item": self.source.item,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "governed": self.governed,
            "admitted": self.admitted,
            "denials": [d.as_dict() for d in self.denials],
            "filled": [{"label": f.label, "value": f.value, "why": f.why} for f in self.filled],
            "localQueue": self.local_queue,
            "clusterQueue": self.cluster_queue,
            "flavors": self.flavors,
            "requestsGPUs": self.requests_gpus,
        }


def _flavors(facts: AdmissionFacts, obj: dict[str, Any], namespace: str) -> tuple[list[str], bool]:
    """The team's pools that can hold some GPU pod of ``obj`` (in policy order), and whether it wants GPUs."""
    s = subject(facts, obj, namespace)
    if s is None or s.team is None:
        return [], False
    names: set[str] = set()
    wants = False
    for spec in s.specs:
        needs = pod_gpus(spec, facts.gpu_resources) | claim_needs(spec, facts.claim_resources)
        wants = wants or bool(needs)
        names |= {p.name for p in candidates(s.team, spec) if needs and fits(p, needs)}
    return [p.name for p in s.team.pools if p.name in names], wants


def verdict(facts: AdmissionFacts, source: Source, default_namespace: str = DEFAULT_NAMESPACE) -> Verdict:
    obj = source.obj
    metadata = mapping(obj, "metadata")
    namespace = text(metadata, "namespace") or default_namespace
    name = text(metadata, "name") or text(metadata, "generateName") or "<unnamed>"
    # a federated fleet's clusters run no mutating webhook (its bundles render none): nothing is filled in
    residency = residency_of(facts)
    federated = residency is not None
    filled = [] if federated else fills(facts, obj, namespace)
    admitted_as = obj if federated else apply(obj, patch(facts, obj, namespace))
    s = subject(facts, admitted_as, namespace)
    denials = judge(facts, admitted_as, namespace)
    out = Verdict(source, str(obj.get("kind")), namespace, name, s is not None, denials, filled)
    if s is None or s.scope is not Scope.BATCH or s.team is None or denials:
        return out
    flavors, wants = _flavors(facts, admitted_as, namespace)
    local_queue = cluster_queue = s.team.name
    if residency is not None:  # the zone queue; the manager's ClusterQueue is named as it is
        local_queue = s.label(QUEUE_LABEL) or local_queue
        cluster_queue = local_queue if residency.cluster is None else s.team.name
        zone = residency.zone_of.get(s.label(facts.data_class_label) or "")
        if zone is not None and residency.cluster is None:  # the manager's zone queue holds the zone's pools
            flavors = [f for f in flavors if f in residency.zone_pools[zone]]
    return Verdict(source, out.kind, namespace, name, True, [], filled, local_queue, cluster_queue, flavors, wants)


def check(facts: AdmissionFacts, sources: list[Source], default_namespace: str = DEFAULT_NAMESPACE) -> list[Verdict]:
    return [verdict(facts, source, default_namespace) for source in sources]
