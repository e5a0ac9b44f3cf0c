"""``gpufleet twin step`` end to end: stable JSON keys, human tables, and errors that name the object."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app

SCENARIO = Path(__file__).parent / "scenarios" / "schedule_preempt_in_cq_and_cohort.yaml"

runner = CliRunner()


def _objects_only(tmp_path: Path, source: Path) -> Path:
    """The scenario minus its TwinScenario document: exactly what a user would pass."""
    docs = source.read_text(encoding="utf-8").split("\n---\n")
    kept = [d for d in docs if "kind: TwinScenario" not in d]
    out = tmp_path / "objects.yaml"
    out.write_text("\n---\n".join(kept), encoding="utf-8")
    return out


def test_json_report_has_the_documented_keys(tmp_path: Path) -> None:
    args = ["twin", "step", str(_objects_only(tmp_path, SCENARIO)), "--cycles", "2", "--json", "--no-clocks"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert set(report) >= {"cycles", "clusterQueues", "clocks", "loop"}
    assert report["clocks"] is None and report["loop"] is None
    first, second = report["cycles"]
    assert {p["workload"]: p["reason"] for p in first["preempted"]} == {
        "eng-alpha/borrower": "InCohortReclamation",
        "eng-beta/low-2": "InClusterQueue",
    }
    assert all(set(p) >= {"workload", "preemptor", "reason"} for p in first["preempted"])
    assert all(set(p) >= {"workload", "reason", "message", "queue"} for p in first["pending"])
    assert [a["workload"] for a in second["admitted"]] == ["eng-beta/preemptor"]
    assert second["admitted"][0]["flavors"] == {"main": {"cpu": "on-demand"}}
    beta = report["clusterQueues"]["eng-beta"]
    assert set(beta) >= {"usage", "borrowed", "weightedShare"}
    assert beta["usage"]["on-demand/cpu"] == 50_000


def test_human_output_is_a_table(tmp_path: Path) -> None:
    result = runner.invoke(app, ["twin", "step", str(_objects_only(tmp_path, SCENARIO)), "--cycles", "1"])
    assert result.exit_code == 0, result.output
    assert "cycle 1" in result.output and "preempted" in result.output and "ClusterQueues" in result.output


STRICT = Path(__file__).parent / "scenarios" / "queue_strict_fifo_blocks.yaml"


def test_json_marks_what_kueue_does_not_write(tmp_path: Path) -> None:
    result = runner.invoke(app, ["twin", "step", str(_objects_only(tmp_path, STRICT)), "--cycles", "1", "--json"])
    assert result.exit_code == 0, result.output
    pending = {p["workload"]: p for p in json.loads(result.output)["cycles"][0]["pending"]}
    assert pending["default/big"]["kueueWrites"] is True  # the head: Kueue's QuotaReserved=False
    assert pending["default/small"]["kueueWrites"] is False  # never popped: no condition in Kueue
    assert pending["default/small"]["message"].endswith("behind StrictFIFO head default/big")


def test_human_table_marks_the_twins_own_explanations(tmp_path: Path) -> None:
    result = runner.invoke(app, ["twin", "step", str(_objects_only(tmp_path, STRICT)), "--cycles", "1"])
    assert result.exit_code == 0, result.output
    rows = {cells[1].strip(): cells[2] for line in result.output.splitlines() if len(cells := line.split("│")) > 3}
    assert "\N{DAGGER}" in rows["default/small"]  # the decision column carries the mark
    assert "\N{DAGGER}" not in rows["default/big"]
    assert "the twin's own explanation" in result.output


BAD = {
    "unknown kind": ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "unknown kind 'ConfigMap'"),
    "missing local queue": (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w, namespace: ns}\n"
        "spec: {queueName: nope, podSets: [{name: main, count: 1, template: {spec: {containers: []}}}]}\n",
        "Workload ns/w points at LocalQueue ns/nope, which does not exist",
    ),
    "malformed quantity": (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n"
        "  resourceGroups: [{coveredResources: [cpu],\n"
        "    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1xyz}]}]}]\n",
        "ClusterQueue cq: malformed quantity '1xyz'",
    ),
    "not yaml": ("kind: [\n", "not valid YAML"),
}


@pytest.mark.parametrize(("text", "message"), BAD.values(), ids=BAD.keys())
def test_bad_input_exits_2_naming_the_object(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["twin", "step", str(path)])
    assert result.exit_code == 2
    flat = " ".join(result.output.split())  # the console wraps long lines
    assert " ".join(message.split()) in flat
    assert "Traceback" not in flat


def _gpu_workload(name: str, queue: str, gpus: int, second: int) -> str:
    return f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{namespace: default, name: {name}, creationTimestamp: '2025-01-01T00:00:0{second}Z'}}
spec:
  queueName: {queue}
  podSets:
  - name: main
    count: 1
    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '{gpus}'}}}}}}]}}}}
"""


def _gpu_queue(name: str, gpus: int) -> str:
    return f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohortName: c
  namespaceSelector: {{}}
  preemption: {{reclaimWithinCohort: Any}}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{{name: gpu, resources: [{{name: nvidia.com/gpu, nominalQuota: '{gpus}'}}]}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{namespace: default, name: {name}}}
spec: {{clusterQueue: {name}}}
"""


# Seed 51 of the random differential, made small. Cycle 1 admits high-x (4 of high's 8 GPUs) and
# low-a (8 GPUs: 4 of low's own, 4 borrowed). Cycle 2: high-y reclaims by preempting low-a, and
# low-b, low-a's look-alike, fails on its own while low-a still holds its quota (Kueue writes "8 more
# needed" on it). Once low-a's quota is released, both come back; low-a, the older, fails and moves
# low-b in bulk without a new condition: low-b's condition still says "8 more needed".
KEPT = "\n---\n".join(
    [
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: gpu}\n",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n",
        _gpu_queue("high", 8),
        _gpu_queue("low", 4),
        _gpu_workload("high-x", "high", 4, 0),
        _gpu_workload("low-a", "low", 8, 1),
        _gpu_workload("low-b", "low", 8, 2),
        _gpu_workload("high-y", "high", 4, 3),
    ]
)


def test_json_gives_the_condition_kueue_left_on_a_moved_equivalent(tmp_path: Path) -> None:
    objects = tmp_path / "kept.yaml"
    objects.write_text(KEPT, encoding="utf-8")
    result = runner.invoke(app, ["twin", "step", str(objects), "--json"])
    assert result.exit_code == 0, result.output
    cycles = json.loads(result.output)["cycles"]
    assert [p["workload"] for c in cycles for p in c["preempted"]] == ["default/low-a"]
    pending = {p["workload"]: p for p in cycles[-1]["pending"]}
    needed = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu"
    assert pending["default/low-a"]["message"] == f"{needed}, 4 more needed"
    assert pending["default/low-a"]["kueueWrites"] is True and "kueueStatus" not in pending["default/low-a"]
    b = pending["default/low-b"]
    assert (b["kueueWrites"], b["kueueStatus"]) == (
        False,
        {"reason": "Pending", "message": f"{needed}, 8 more needed"},  # Kueue's legacy reason: the gate is off
    )
    human = runner.invoke(app, ["twin", "step", str(objects)])
    cells = " ".join(cell.strip() for line in human.output.splitlines() for cell in line.split("│") if cell.strip())
    assert "(its condition still says: Pending: couldn't assign flavors" in cells
