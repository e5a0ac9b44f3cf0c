"""``gpufleet twin step`` refuses what Kueue's API refuses: negative or malformed counts, quantities,
weights, priorities and enum values, each named by file, line, object and field (exit 2).

The bounds are Kueue v0.19.2's: pod set ``count`` >= 0 and ``minCount`` in [1, count] (CRD
markers and the ``minCount <= count`` CEL rule of ``workload_types.go``), quantities >= 0
(``validateResourceQuantity``, ``WorkloadValidateResourcesAreNonNegative``), a fair-sharing
weight of 0 or above 10^-9 (``validateFairSharing``), ``int32`` counts and priorities.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app

runner = CliRunner()

HEADER = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: ns, name: q}
spec: {clusterQueue: cq}
---
"""


def queue(resources: str = "{name: nvidia.com/gpu, nominalQuota: 8}", extra: str = "") -> str:
    return (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n"
        f"  namespaceSelector: {{}}\n{extra}"
        "  resourceGroups: [{coveredResources: [nvidia.com/gpu],\n"
        f"    flavors: [{{name: f, resources: [{resources}]}}]}}]\n---\n"
    )


def workload(pod_set: str = "count: 1", requests: str = "{nvidia.com/gpu: 8}", spec: str = "") -> str:
    return (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w, namespace: ns}\n"
        f"spec:\n  queueName: q\n{spec}"
        f"  podSets: [{{name: main, {pod_set}, template: {{spec: {{containers: "
        f"[{{name: c, resources: {{requests: {requests}}}}}]}}}}}}]\n"
    )


AFS_CONFIG = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nadmissionFairSharing: {{{}}}\n---\n"


def local_queue(spec: str, status: str) -> str:
    """A second LocalQueue (q2) with AdmissionFairSharing's weight or status."""
    fields = f"spec: {{clusterQueue: cq, {spec}}}\n" if spec else "spec: {clusterQueue: cq}\n"
    if status:
        fields += f"status: {{fairSharing: {{weightedShare: 0, admissionFairSharingStatus: {{{status}}}}}}}\n"
    return f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{namespace: ns, name: q2}}\n{fields}---\n"


# id -> (objects after HEADER, line where the object starts (the ClusterQueue or Configuration at 10, the
# Workload after a plain ClusterQueue at 18), field path, message fragment)
CASES = {
    "negative count": (
        queue() + workload("count: -3"),
        18,
        "spec.podSets[0].count",
        "Workload ns/w: expected a pod count between 0 and 2147483647, got -3",
    ),
    "count beyond int32": (
        queue() + workload("count: 4294967296"),
        18,
        "spec.podSets[0].count",
        "expected a pod count between 0 and 2147483647, got 4294967296",
    ),
    "malformed count": (
        queue() + workload("count: 2x"),
        18,
        "spec.podSets[0].count",
        "expected a pod count between 0 and 2147483647, got '2x'",
    ),
    "minCount zero": (
        queue() + workload("count: 4, minCount: 0"),
        18,
        "spec.podSets[0].minCount",
        "expected a minCount between 1 and the pod set's count (4), got 0",
    ),
    "minCount above count": (
        queue() + workload("count: 4, minCount: 7"),
        18,
        "spec.podSets[0].minCount",
        "expected a minCount between 1 and the pod set's count (4), got 7",
    ),
    "negative request": (
        queue() + workload(requests="{nvidia.com/gpu: -8}"),
        18,
        "spec.podSets[0].template.spec.containers[0].resources.requests[nvidia.com/gpu]",
        "expected a quantity of 0 or more, got -8",
    ),
    "negative nominal quota": (
        queue("{name: nvidia.com/gpu, nominalQuota: '-8'}") + workload(),
        10,
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        "ClusterQueue cq: expected a quantity of 0 or more, got '-8'",
    ),
    "negative borrowing limit": (
        queue("{name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: -1}") + workload(),
        10,
        "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
        "expected a quantity of 0 or more, got -1",
    ),
    "negative weight": (
        queue(extra="  fairSharing: {weight: '-1'}\n") + workload(),
        10,
        "spec.fairSharing.weight",
        "weight '-1' must be between 0",
    ),
    "weight that collapses to 0": (
        queue(extra="  fairSharing: {weight: 1e-10}\n") + workload(),
        10,
        "spec.fairSharing.weight",
        "when not 0, a weight must be greater than 10^-9",
    ),
    "priority beyond int32": (
        queue() + workload(spec="  priority: 3000000000\n"),
        18,
        "spec.priority",
        "expected a priority in the 32-bit integer range, got 3000000000",
    ),
    "unknown queueing strategy": (
        queue(extra="  queueingStrategy: StrictFifo\n") + workload(),
        10,
        "spec.queueingStrategy",
        "expected one of BestEffortFIFO, StrictFIFO, got 'StrictFifo'",
    ),
    "unknown reclaim policy": (
        queue(extra="  preemption: {reclaimWithinCohort: Always}\n") + workload(),
        10,
        "spec.preemption.reclaimWithinCohort",
        "expected one of Never, LowerPriority, Any, got 'Always'",
    ),
    "active as a string": (
        queue() + workload(spec="  active: 'false'\n"),
        18,
        "spec.active",
        "expected true or false, got str 'false'",
    ),
    "feature gate as a string": (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "featureGates: {PrioritizePreemptorWorkloads: 'yes'}\n---\n" + queue() + workload(),
        10,
        "featureGates.PrioritizePreemptorWorkloads",
        "Configuration: expected true or false, got str 'yes'",
    ),
    "a gate the twin models only at its default": (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "featureGates: {PartialAdmission: false}\n---\n" + queue() + workload(),
        10,
        "featureGates.PartialAdmission",
        "the twin models Kueue with PartialAdmission at its default (true) only",
    ),
    **{
        f"admission fair sharing: {name}": (AFS_CONFIG.format(section) + queue() + workload(), 10, path, message)
        for name, (section, path, message) in {
            "half-life not a duration": (
                "usageHalfLifeTime: 10 minutes",
                "admissionFairSharing.usageHalfLifeTime",
                "Configuration: malformed duration '10 minutes'",
            ),
            "half-life as a bare number": (
                "usageHalfLifeTime: 600",
                "admissionFairSharing.usageHalfLifeTime",
                "expected a duration such as 5m or 1h30m, got int 600",
            ),
            "negative half-life": (
                "usageHalfLifeTime: -1m",
                "admissionFairSharing.usageHalfLifeTime",
                "must be 0 or more, got -1m",
            ),
            "negative sampling interval": (
                "usageHalfLifeTime: 1h, usageSamplingInterval: -5m",
                "admissionFairSharing.usageSamplingInterval",
                "must be greater than 0, got -5m",
            ),
            "negative resource weight": (
                "usageHalfLifeTime: 1h, resourceWeights: {nvidia.com/gpu: -1}",
                "admissionFairSharing.resourceWeights.nvidia.com/gpu",
                "expected a weight of 0 or more, got -1",
            ),
            "resource weight as a string": (
                "usageHalfLifeTime: 1h, resourceWeights: {cpu: 'high'}",
                "admissionFairSharing.resourceWeights.cpu",
                "expected a number, got str 'high'",
            ),
        }.items()
    },
    "admission fair sharing: unknown admission mode": (
        queue(extra="  admissionScope: {admissionMode: UsageBased}\n") + workload(),
        10,
        "spec.admissionScope.admissionMode",
        "expected one of UsageBasedAdmissionFairSharing, NoAdmissionFairSharing, got 'UsageBased'",
    ),
    **{
        f"admission fair sharing: LocalQueue {name}": (
            local_queue(spec, status) + queue() + workload(),
            10,
            path,
            message,
        )
        for name, (spec, status, path, message) in {
            "negative weight": (
                "fairSharing: {weight: '-1'}",
                "",
                "spec.fairSharing.weight",
                "LocalQueue q2: weight '-1' must be between 0",
            ),
            "malformed consumed resources": (
                "",
                "consumedResources: {cpu: 1xyz}, lastUpdate: '2025-01-01T00:00:00Z'",
                "status.fairSharing.admissionFairSharingStatus.consumedResources.cpu",
                "malformed quantity '1xyz'",
            ),
            "negative consumed resources": (
                "",
                "consumedResources: {nvidia.com/gpu: '-2'}, lastUpdate: '2025-01-01T00:00:00Z'",
                "status.fairSharing.admissionFairSharingStatus.consumedResources.nvidia.com/gpu",
                "expected a quantity between 0 and 9223372036854775807, got '-2'",
            ),
            "lastUpdate not a time": (
                "",
                "consumedResources: {cpu: '1'}, lastUpdate: yesterday",
                "status.fairSharing.admissionFairSharingStatus.lastUpdate",
                "not an RFC 3339 timestamp: 'yesterday'",
            ),
        }.items()
    },
}


@pytest.mark.parametrize(("objects", "line", "path", "message"), CASES.values(), ids=CASES.keys())
def test_bad_numbers_exit_2_naming_file_object_and_field(
    tmp_path: Path, objects: str, line: int, path: str, message: str
) -> None:
    target = tmp_path / "cluster.yaml"
    target.write_text(HEADER + objects, encoding="utf-8")
    result = runner.invoke(app, ["twin", "step", str(target)])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())  # the console wraps long lines
    assert f"{target}:{line}: {path}: " in flat
    assert message in flat
    assert "Traceback" not in flat and "<input>" not in flat
    as_json = runner.invoke(app, ["twin", "step", str(target), "--json"])
    assert as_json.exit_code == 2
    (problem,) = json.loads(as_json.output)["problems"]
    assert (problem["file"], problem["line"], problem["path"]) == (str(target), line, path)
    assert message in problem["message"]


def test_conflicting_flags_name_the_command_line(tmp_path: Path) -> None:
    target = tmp_path / "cluster.yaml"
    target.write_text(HEADER + queue() + workload(), encoding="utf-8")
    result = runner.invoke(app, ["twin", "step", str(target), "--cycles", "1", "--until-stable"])
    assert result.exit_code == 2
    assert "command line: --until-stable: use either --cycles or --until-stable" in result.output
    assert "<input>" not in result.output
