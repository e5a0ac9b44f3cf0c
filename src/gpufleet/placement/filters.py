"""kube-scheduler's static filters, in its plugin order: TaintToleration, then NodeAffinity
(which includes ``nodeSelector``). NodeResourcesFit lives with the node's free state. Each filter
answers ``None`` (passes) or the reason kube-scheduler prints for the node."""

from __future__ import annotations

from gpufleet.placement.node import NodeSpec
from gpufleet.placement.pod import PodSpec
from gpufleet.vocabulary import TaintEffect

AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"


def untolerated_taint(node: NodeSpec, pod: PodSpec) -> str | None:
    """The first NoSchedule/NoExecute taint no toleration covers (PreferNoSchedule only scores)."""
    for taint in node.taints:
        if taint.effect is TaintEffect.PREFER_NO_SCHEDULE:
            continue
        if not any(t.tolerates(taint) for t in pod.tolerations):
            return f"node(s) had untolerated taint {taint}"
    return None


def affinity_mismatch(node: NodeSpec, pod: PodSpec) -> str | None:
    """``nodeSelector`` must match in full, and at least one required term (if any) must match."""
    labels = node.label_map()
    if any(labels.get(k) != v for k, v in pod.node_selector):
        return AFFINITY_MISMATCH
    if pod.affinity and not any(all(r.matches(labels) for r in term) for term in pod.affinity):
        return AFFINITY_MISMATCH
    return None


def static_verdict(node: NodeSpec, pod: PodSpec) -> str | None:
    """The first failing static filter's reason, in kube-scheduler's plugin order."""
    return untolerated_taint(node, pod) or affinity_mismatch(node, pod)


def insufficient_message(resource: str) -> str:
    return f"Insufficient {resource}"


def unavailable_message(total_nodes: int, histogram: dict[str, int]) -> str:
    """kube-scheduler's FitError text: ``0/N nodes are available: <count> <reason>, ….``, the
    ``count reason`` strings sorted as strings, as kube-scheduler sorts them."""
    parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
    body = (" " + ", ".join(parts)) if parts else ""
    return f"0/{total_nodes} nodes are available:{body}."
