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
