"""The twin is built from render's Kueue objects in memory: the same cluster as the written bundle."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpufleet.policy import load_policy, parse_policy, resolve
from gpufleet.render import render
from gpufleet.render.bundle import dump
from gpufleet.simulate.queue import cluster_spec
from gpufleet.twin import parse_cluster
from tests.support import EXAMPLES

KINDS = {
    "ResourceFlavor",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "WorkloadPriorityClass",
    "Namespace",
    "Configuration",
}


@pytest.mark.parametrize("policy", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_the_twin_reads_the_objects_the_bundle_writes(policy: str) -> None:
    """Parsing the whole rendered bundle's Kueue objects back from YAML gives the same cluster, but
    for gpufleet's own namespace (its webhook and recorder run there; no queue does)."""
    fleet = resolve(load_policy(Path(EXAMPLES / policy)))
    objects = [o for o in render(fleet).objects(resources_only=False) if o.get("kind") in KINDS]
    written = parse_cluster([("bundle", dump(objects))])
    direct = cluster_spec(fleet)
    assert set(written.namespaces) - set(direct.namespaces) == {"gpufleet-system"}
    assert replace(written, namespaces=direct.namespaces) == direct
    assert direct.cluster_queues and direct.local_queues and direct.flavors


def test_the_twin_queues_carry_each_teams_preemption() -> None:
    """The fleet's borrowWithinCohort with a threshold, and research's own override, reach the twin
    the simulator runs: research never preempts while borrowing, the others do, below priority 100."""
    text = (EXAMPLES / "fleet.yaml").read_text()
    text = text.replace(
        "  fairSharing: true\n",
        "  fairSharing: false\n  borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}\n",
        1,
    ).replace(
        "    namespaces: [research]\n",
        "    namespaces: [research]\n    preemption: {withinClusterQueue: Never, borrowWithinCohort: {policy: Never}}\n",
        1,
    )
    queues = cluster_spec(resolve(parse_policy(text, "fleet.yaml"))).cluster_queues
    got = {
        name: (
            q.preemption.within_cluster_queue,
            q.preemption.borrow_within_cohort,
            q.preemption.max_priority_threshold,
        )
        for name, q in queues.items()
    }
    assert got == {
        "research": ("Never", "Never", None),
        "nlp": ("LowerPriority", "LowerPriority", 100),
        "vision": ("LowerPriority", "LowerPriority", 100),
    }
